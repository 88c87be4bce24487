# Sourced by the scripts that run on the GPU machine, from the repository root there (set `root`
# first to use another): unpacks the Vulkan loader and glvnd .debs carried in .gl (the device
# README's "Headless rendering"), points the loader at the NVIDIA ICD (outside its default
# search path there), and puts the FISH build carried in .devcarry on the paths: D (.devcarry),
# B (its bin/), LD_LIBRARY_PATH, FISH_BIN (context.sh asks it which GPU it opens: no vulkaninfo
# there) and FISH_SYNTHETIC_DIR (default /tmp/syn, created: synthetic models stay on the machine
# between calls while it is held).
root=${root:-$PWD}
for f in "$root"/.gl/*.deb; do dpkg -x "$f" /; done
ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] && export VK_DRIVER_FILES=$icd
D=$root/.devcarry
B=$D/bin
# gpu_prefill.sh pack carries the binaries as bin.tar.xz.
[ -f $D/bin.tar.xz ] && [ ! -x $B/fish ] && tar -C $D -xJf $D/bin.tar.xz
export LD_LIBRARY_PATH=$D/lib FISH_BIN=$B/fish FISH_SYNTHETIC_DIR=${FISH_SYNTHETIC_DIR:-/tmp/syn}
mkdir -p "$FISH_SYNTHETIC_DIR"

# synthetic_models THREADS LOGDIR: writes the synthetic Llama-1B / 8B Q4_K_M files the GPU
# experiments use (those not in FISH_SYNTHETIC_DIR yet) in the background, logs in
# LOGDIR/make-<shape>.log; their pids in SYN_PIDS (wait for them before using the files).
synthetic_models() {
  SYN_PIDS=()
  local s f
  for s in llama-1b llama-8b; do
    f=$FISH_SYNTHETIC_DIR/$s-q4_k_m-s1.gguf
    [ -f $f ] || { $B/fish make-model --shape $s --type q4_k_m --seed 1 --threads $1 --out $f \
                     > $2/make-$s.log 2>&1 & SYN_PIDS+=($!); }
  done
}
