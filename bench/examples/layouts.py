#!/usr/bin/python3
"""Runs examples 01-03 in the layouts a user runs them in and prints fused vs sequential.

Layouts: `np2` and `np4` on one node (shared memory), `2x1` and `2x2` = 2 emulated nodes x 1 or 2
ranks through tools/cluster (network namespaces, TCP over veth at --rate; needs root). Each example
prints, per mode, its median time [min, max] and the speed-up over sequential as the median [min,
max] over rotations of the modes (the modes take turns inside every step; a rotation is as many
steps as modes, every mode once in every position: examples/README.md). This script collects those
lines into one markdown table.

With several --build directories (A/B: e.g. main's build and a branch's), the builds alternate run
by run, so both see the same machine load. --cpus split,shared does the same for how the emulated
nodes get CPUs (tools/cluster --cpus: each node its own share of the cores, or all nodes every
core); the layout column then says which.

  bench/examples/layouts.py --build build [--build /tmp/base/build] [--layouts np2,np4,2x1,2x2]
                            [--examples 01,02,03] [--rate 1gbit] [--link tbf|nic] [--repeat 1]
                            [--mode fused] [--steps N] [--cpus split[,shared]]

--link says what the emulated links are. tbf (the default): tools/cluster's token bucket of 2 ms of
the rate, which an idle link saves up and the next transfer spends at once. A loop whose steps
move about a bucket's worth of bytes then times its calls by their place in the step: at 2 x 2
and 1 Gbit/s, example 03's top-1 layer took 0.9 ms right after the gate and 2.2 ms one call
later, whatever the mode. nic: a 64 KiB bucket and 32 KiB packets (cluster.sh --burst 65536
--gso 32768), a link that sends at its rate as a NIC does; it keeps 0.93 of 1 Gbit/s but loses
rate at 2 Gbit/s and up while the ranks compute (bench/results/nic_link_2026-11-29), so use it at
1 Gbit/s. --burst and --gso set the two by hand.

--mode auto compares Mode::Auto with sequential and adds the mode(s) Auto settled on (it tries
the modes on a context's first 12 calls, up to 30 when they are close; give it --steps 200: with
40, a run with a profile on 2026-11-29 left every context of every example still trying, with
200 all settled; bench/results/examples_auto_profile_2026-11-29).
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAMS = {
    "01": ("01_dlrm_embedding", ["--steps", "16"]),
    "02": ("02_tp_decode", ["--tokens", "16"]),
    "03": ("03_moe_layer", ["--steps", "16"]),
}
LINE = re.compile(
    r"^\s+(sequential|shaped|fused|auto)\s+(.*?)\s*median\s+([\d.]+) ms\s+\(x([\d.]+) vs "
    r"sequential, \d+ samples\)"
)
RANGE = re.compile(r"^\s+range ([\d.]+)-([\d.]+) ms, x([\d.]+)-x([\d.]+)")
SECTION = re.compile(r"^\s*(top-\d+):")
SETTLED = re.compile(r"auto (settled on \w+|still trying)")


def command(build, layout, program, args, rate, cpus, burst=0, gso=0):
    exe = os.path.join(os.path.abspath(build), "examples", program)
    if layout.startswith("np"):
        return ["mpirun", "-np", layout[2:], "--oversubscribe", "--bind-to", "none",
                "--mca", "mpi_yield_when_idle", "1", exe] + args
    nodes, per_node = layout.split("x")
    return ([os.path.join(ROOT, "tools", "cluster", "cluster.sh"), "--nodes", nodes,
             "--ranks-per-node", per_node, "--rate", rate, "--cpus", cpus]
            + (["--burst", str(burst)] if burst else []) + (["--gso", str(gso)] if gso else [])
            + ["--", exe] + args)


def settled(output):
    """What Auto settled on, per context in print order ("fused", "sequential/shaped", ...)."""
    return "/".join(m.group(1).replace("settled on ", "").replace("still trying", "(trying)")
                    for m in SETTLED.finditer(output))


def parse(output):
    """{(phase, mode): (median, min, max, speedup, speedup_min, speedup_max)}"""
    rows, section, last = {}, "", None
    for line in output.splitlines():
        m = SECTION.match(line)
        if m:
            section = m.group(1) + " "
            continue
        m = LINE.match(line)
        if m:
            last = (section + m.group(2), m.group(1), float(m.group(3)), float(m.group(4)))
            continue
        m = RANGE.match(line)
        if m and last:  # the line right after a mode line: its ranges
            phase, mode, med, speedup = last
            lo, hi, s_lo, s_hi = (float(g) for g in m.groups())
            rows[(phase, mode)] = (med, lo, hi, speedup, s_lo, s_hi)
        last = None
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", action="append", help="build directory (repeat for A/B)")
    ap.add_argument("--layouts", default="np2,np4,2x1,2x2")
    ap.add_argument("--examples", default="01,02,03")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--repeat", type=int, default=1, help="runs per build and layout")
    ap.add_argument("--mode", default="fused", help="--mode passed to the examples")
    ap.add_argument("--steps", type=int, default=0, help="steps (01, 03) / tokens (02); 0: default")
    ap.add_argument("--link", choices=("tbf", "nic"), default="tbf",
                    help="the emulated links: tbf, cluster.sh's default bucket; nic, --burst 65536 "
                         "--gso 32768 (above)")
    ap.add_argument("--burst", type=int, default=0,
                    help="tbf burst of the emulated links in bytes (0: as --link says)")
    ap.add_argument("--gso", type=int, default=0,
                    help="the veths' largest packet in bytes (0: as --link says); a burst under "
                         "64 KiB needs one under the burst, or tbf stalls the link")
    ap.add_argument("--cpus", default="split",
                    help="emulated nodes' CPUs: split, shared or both (split,shared), alternating")
    a = ap.parse_args()
    if a.link == "nic":
        a.burst, a.gso = a.burst or 65536, a.gso or 32768
    builds = a.build or [os.path.join(ROOT, "build")]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OPENBLAS_NUM_THREADS="1")
    auto = a.mode == "auto"
    print(f"| example | phase | layout | build | sequential ms [min, max] | {a.mode} ms [min, max] "
          f"| {a.mode} speed-up [min, max] |" + (" settled on |" if auto else ""))
    print("|---|---|---|---|---|---|---|" + ("---|" if auto else ""))
    failed = False
    for ex in a.examples.split(","):
        program, args = PROGRAMS[ex]
        if a.steps:
            args = [args[0], str(a.steps)]
        for layout in a.layouts.split(","):
            cpu_modes = [""] if layout.startswith("np") else a.cpus.split(",")
            for rep in range(a.repeat):
                for build, cpus in [(b, c) for b in builds for c in cpu_modes]:
                    cmd = command(build, layout, program, args + ["--mode", a.mode], a.rate, cpus,
                                  a.burst, a.gso)
                    where = f"{layout} {cpus}" if len(cpu_modes) > 1 else layout
                    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
                    if p.returncode != 0:
                        failed = True
                        print(f"| {ex} | FAILED (rc {p.returncode}) | {where} | {build} | | | |")
                        sys.stderr.write(p.stdout + p.stderr)
                        continue
                    rows = parse(p.stdout)
                    extra = f" {settled(p.stdout)} |" if auto else ""
                    for (phase, mode), v in rows.items():
                        if mode == "sequential":
                            continue
                        seq = rows.get((phase, "sequential"))
                        if not seq:
                            continue
                        print(f"| {ex} | {phase} | {where} | {build} | {seq[0]:.3f} "
                              f"[{seq[1]:.3f}, {seq[2]:.3f}] | {v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}] "
                              f"| x{v[3]:.2f} [{v[4]:.2f}, {v[5]:.2f}] |{extra}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
