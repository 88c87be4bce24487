// Included by matvec_fast.comp.glsl and matvec_idot.comp.glsl (no main) once ROWS (rows a
// thread accumulates) and NACC (accumulators of the workgroup's rows, acc[row * MAX_TOK + token]:
// ROWS * FISH_MATVEC_MAX_TOK, or that times matvec_idot's row groups) are defined, with y bound:
// the workgroup's rows and the reduction of every thread's partial sums (added to y's rows rather
// than stored where the includer defines MATVEC_ACCUMULATE).

// Row block `group`'s first row (wg_rows rows a block) and the byte offset rb[r] of its row
// first + r (rows past n_out clamped to the last, so the hot loop needs no bounds checks).
void group_rows(uint group, uint wg_rows, uint first, out uint row0, out uint rb[ROWS]) {
  row0 = group * wg_rows;
  [[unroll]] for (uint r = 0u; r < ROWS; ++r)
    rb[r] = min(row0 + first + r, pc.n_out - 1u) * pc.row_bytes;
}

// The workgroup's block (one block a workgroup): false for the grid's spare workgroups (the
// whole workgroup returns: no barrier is skipped by a part of it).
bool workgroup_rows(uint wg_rows, uint first, out uint row0, out uint rb[ROWS]) {
  const uint group = gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x;
  group_rows(group, wg_rows, first, row0, rb);
  return group < pc.n_groups;
}

// The token slots of a row (MV_TOK, default FISH_MATVEC_MAX_TOK) and whether slot t is a token
// of this dispatch (MV_LIVE(t), default t < pc.n_tok); matvec_idot's EXACT pipelines define both.
#ifndef MV_TOK
#define MV_TOK FISH_MATVEC_MAX_TOK
#endif
#ifndef MV_LIVE
#define MV_LIVE(t) ((t) < pc.n_tok)
#endif

#ifndef MATVEC_NO_REDUCE  // matvec_idot's PRONORM reduces per row group (pn_reduce_store)
#define SLOTS 32u                   // subgroup partial sums per pass
shared float partial[NACC][SLOTS];  // [row * MV_TOK + tok][subgroup - pass start]

// subgroupAdd, one shared slot per subgroup (any subgroup size: the slots are drained in passes
// of SLOTS), then thread i stores accumulators i, i + WG, ... (< NACC; a workgroup of 32 threads
// may hold up to 128) unless its row or token is past the end.
const uint PER_THREAD = (NACC + 31u) / 32u;  // accumulators a thread stores (32 threads or more)
void reduce_store(float acc[NACC], uint row0) {
  [[unroll]] for (uint t = 0u; t < MV_TOK; ++t)
    if (MV_LIVE(t))
      [[unroll]] for (uint r = 0u; r < NACC / MV_TOK; ++r)
        acc[r * MV_TOK + t] = subgroupAdd(acc[r * MV_TOK + t]);
  const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  float total[PER_THREAD];
  [[unroll]] for (uint j = 0u; j < PER_THREAD; ++j) total[j] = 0.0;
  for (uint g0 = 0u; g0 < gl_NumSubgroups; g0 += SLOTS) {  // one pass unless subgroups < 4 lanes
    const uint slot = gl_SubgroupID - g0;
    if (subgroupElect() && slot < SLOTS)
      [[unroll]] for (uint k = 0u; k < NACC; ++k) partial[k][slot] = acc[k];
    barrier();
    [[unroll]] for (uint j = 0u; j < PER_THREAD; ++j) {
      const uint i = lid + j * wg;
      if (i < NACC)
        for (uint g = 0u; g < min(SLOTS, gl_NumSubgroups - g0); ++g) total[j] += partial[i][g];
    }
    barrier();
  }
  [[unroll]] for (uint j = 0u; j < PER_THREAD; ++j) {
    const uint i = lid + j * wg;
    if (i >= NACC) continue;
    const uint r = row0 + i / MV_TOK;
    const uint t = i % MV_TOK;
    if (r < pc.n_out && t < pc.n_tok) {
#ifdef MATVEC_ACCUMULATE  // y += W x (matvec_idot_res_<type>: the residual add)
      y[pc.y_offset + t * pc.y_stride + r] += total[j];
#else
      y[pc.y_offset + t * pc.y_stride + r] = total[j];
#endif
    }
  }
}
#endif  // MATVEC_NO_REDUCE
