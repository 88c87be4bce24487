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
export LD_LIBRARY_PATH=$D/lib FISH_BIN=$B/fish FISH_SYNTHETIC_DIR=${FISH_SYNTHETIC_DIR:-/tmp/syn}
mkdir -p "$FISH_SYNTHETIC_DIR"
