// Package machine describes the machine a benchmark runs on, from Linux's
// /proc and uname: the one reader of the CPU model, the memory size and
// the kernel for results, provenance and the memory limit.
package machine

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// CPUModel returns the CPU model name from /proc/cpuinfo, "" if unknown.
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// MemTotalBytes returns the machine's memory (MemTotal of
// /proc/meminfo) in bytes, and false if it cannot be read.
func MemTotalBytes() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, false
			}
			return kb * 1024, true
		}
	}
	return 0, false
}

// Kernel returns the kernel's name and release as uname -sr prints them
// ("Linux 6.1.0"), "" if unknown.
func Kernel() string {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return ""
	}
	return utsString(u.Sysname[:]) + " " + utsString(u.Release[:])
}

// utsString reads a NUL-terminated utsname field (int8 or uint8 by
// architecture).
func utsString[T int8 | uint8](b []T) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
