#!/usr/bin/env python3
"""measure.py -o FILE -- COMMAND [ARG...]

Runs COMMAND with its standard output and error passed through and, when it
exits, writes one line to FILE:

    user_s system_s max_rss_kib peak_rss_anon_kib peak_rss_file_kib exit_code

user_s, system_s and max_rss_kib are the kernel's own accounting of that
process (wait4(2)'s rusage: ru_utime, ru_stime, ru_maxrss), the figures GNU
time prints as %U %S %M. peak_rss_anon_kib and peak_rss_file_kib are the
largest RssAnon and RssFile (proc(5): /proc/PID/status) seen while sampling
every 10 ms: the memory the process allocated, and the pages of files (its
binary) it has mapped in. A sample can miss a peak shorter than 10 ms, so
these two are lower bounds. Used by scripts/bench-vs-etcd.sh to set each load
generator's own allocations apart from its binary's mapped pages.
"""
import os
import subprocess
import sys
import threading


def status_kib(pid, keys):
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in keys:
                    out[name] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return out


def main(argv):
    if len(argv) < 4 or argv[0] != "-o" or argv[2] != "--":
        sys.stderr.write("usage: measure.py -o FILE -- COMMAND [ARG...]\n")
        return 2
    path, cmd = argv[1], argv[3:]
    proc = subprocess.Popen(cmd)
    peak = {"RssAnon": 0, "RssFile": 0}
    done = threading.Event()

    def sample():
        while not done.is_set():
            for k, v in status_kib(proc.pid, peak).items():
                peak[k] = max(peak[k], v)
            done.wait(0.01)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    # wait4 reaps the process and returns its own rusage; Popen.wait would
    # reap it without.
    _, status, ru = os.wait4(proc.pid, 0)
    done.set()
    t.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    with open(path, "w") as f:
        f.write("%.2f %.2f %d %d %d %d\n" % (ru.ru_utime, ru.ru_stime, ru.ru_maxrss,
                                             peak["RssAnon"], peak["RssFile"], proc.returncode))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
