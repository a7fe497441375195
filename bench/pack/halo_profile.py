#!/usr/bin/env python3
"""Where the CPU time of a halo exchange goes: perf call-graph samples of bench_halo's ranks,
sorted into categories by their innermost frames, per rank and exchange.

  perf record -q --call-graph dwarf,32768 -F 1500 -o alone.data -- \\
    mpiexec.openmpi --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none -n 8 \\
    -x LD_PRELOAD=$PWD/build/openmpi/libhier.so -x HIER_DISABLE=1 \\
    build/openmpi/bench/pack/bench_halo --iters 1500 --warmup 5 [--dirs xrows]
  (the same with HIER_DISABLE=0 -> libhier.data)
  bench/pack/halo_profile.py --hz 1500 --exchanges 1505 --ranks 8 alone.data libhier.data

Samples outside the exchange loop (start-up, fill/check, the validated exchanges) are left out.
"memcpy, caller not unwound" is a memmove leaf whose stack perf could not unwind: with the MPI
alone mostly Open MPI's convertor (it calls memcpy per block), with libhier mostly Open MPI's
copies of the contiguous packed message into and out of its shared-memory fragments. Figures
move by 10-30% between runs on a loaded machine; compare categories within a pair of runs.
"""
import argparse
import collections
import subprocess


def classify(frames):  # innermost frame first
    s = ' '.join(frames)
    if any(k in s for k in ('validated_exchange', 'Halo::fill', 'Halo::check', '_dl_', 'Halo::Halo',
                            'MPI_Init', 'MPI_Finalize', 'ompi_mpi_init', 'ompi_mpi_finalize')):
        return None
    near = ' '.join(frames[:4])
    if 'sched_yield' in s or 'finish_task_switch' in near or '__schedule' in near:
        return 'yield / context switch (idle)'
    if 'Walk<true>' in near or 'host_pack' in near:
        return 'libhier pack (strided)'
    if 'Walk<false>' in near or 'host_unpack' in near:
        return 'libhier unpack (strided)'
    if 'opal_generic_simple_pack' in near:
        return 'Open MPI convertor pack (strided)'
    if 'opal_generic_simple_unpack' in near:
        return 'Open MPI convertor unpack (strided)'
    if 'memmove' in frames[0] or 'memcpy' in frames[0]:
        if 'opal_convertor' in near or 'mca_pml_ob1' in near or 'mca_btl' in near:
            return 'memcpy by Open MPI (contiguous data, fragments)'
        return 'memcpy, caller not unwound'
    if 'process_vm' in s:
        return 'CMA kernel copy'
    for f in frames[:6]:
        if 'hier::' in f or (f.startswith('MPI_') and 'MPI_Wtime' not in f) or 'pthread_mutex' in f \
                or 'malloc' in f or 'free' in f or 'Hashtable' in f:
            return 'libhier wrappers and bookkeeping'
        if any(k in f for k in ('opal_', 'mca_', 'ompi_', 'PMPI_')):
            return 'MPI progress, matching, protocol'
    return 'other'


def samples(path):
    out = subprocess.run(['perf', 'script', '-i', path, '--comm', 'bench_halo', '-F', 'ip,sym'],
                         capture_output=True, text=True, check=True).stdout
    c, frames = collections.Counter(), []
    for line in out.splitlines() + ['']:
        line = line.strip()
        if not line:
            if frames:
                k = classify(frames)
                if k:
                    c[k] += 1
            frames = []
            continue
        parts = line.split(None, 1)
        frames.append(parts[1] if len(parts) > 1 else '?')
    return c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--hz', type=float, required=True)
    ap.add_argument('--exchanges', type=int, required=True)
    ap.add_argument('--ranks', type=int, default=8)
    ap.add_argument('data', nargs='+')
    a = ap.parse_args()
    us = 1e6 / (a.hz * a.exchanges * a.ranks)  # microseconds per sample, per rank and exchange
    res = {p: samples(p) for p in a.data}
    cats = sorted({k for c in res.values() for k in c}, key=lambda k: -max(res[p][k] for p in res))
    print('| us per rank per exchange | ' + ' | '.join(a.data) + ' |')
    print('|---|' + '---:|' * len(a.data))
    for k in cats:
        print('| %s | ' % k + ' | '.join('%.1f' % (res[p][k] * us) for p in a.data) + ' |')
    idle = 'yield / context switch (idle)'
    print('| **work (all but idle)** | ' + ' | '.join('**%.1f**' % ((sum(res[p].values()) - res[p][idle]) * us)
                                                     for p in a.data) + ' |')


if __name__ == '__main__':
    main()
