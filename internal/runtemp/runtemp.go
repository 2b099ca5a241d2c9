// Package runtemp makes the temporary directories an lwbench run works in
// (an embedded member's data directory, kube-apiservers' PKI and logs)
// with an owner file naming the process, so that a later run removes
// those a killed run left behind (RemoveStale), and nothing else.
package runtemp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// The prefixes of the temporary directories lwbench makes (New): the
// prefix, then random digits.
const (
	// EtcdPrefix names an embedded member's data directory.
	EtcdPrefix = "lwbench-etcd-"
	// APIServerPrefix names the directory of the kube-apiservers lwbench
	// starts: their PKI, tokens and logs.
	APIServerPrefix = "lwbench-apiserver-"
	// WorkersPrefix names the directory where lwbench run --workers
	// keeps its workers' results.
	WorkersPrefix = "lwbench-workers-"
)

// prefixes are the names RemoveStale looks for.
var prefixes = []string{EtcdPrefix, APIServerPrefix, WorkersPrefix}

// ownerFile, inside a temporary data directory, names the process that
// made it: "pid=<pid> start=<start>\n", start being the process's start
// time in clock ticks since boot (field 22 of /proc/<pid>/stat; empty
// where /proc cannot be read), so that a pid reused by another process
// is not taken for the owner.
const ownerFile = "lwbench.owner"

// ownerFileMaxBytes bounds the owner file read: it is one short line.
const ownerFileMaxBytes = 256

// New makes a temporary directory under parent ("": os.TempDir()) named
// prefix (EtcdPrefix or APIServerPrefix, else an error) plus random
// digits, with an owner file naming this process, so that a later run can
// tell it from a live run's once this process has been killed
// (RemoveStale). The caller removes it (os.RemoveAll) on every path it
// controls.
func New(parent, prefix string) (string, error) {
	if !slices.Contains(prefixes, prefix) {
		return "", fmt.Errorf("runtemp: unknown prefix %q", prefix)
	}
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return "", err
	}
	pid := os.Getpid()
	start, _ := processStart(pid)
	// Written beside, then renamed: a reader sees no owner file or the
	// whole of it.
	tmp := filepath.Join(dir, ownerFile+".tmp")
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf("pid=%d start=%s\n", pid, start)), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if err := os.Rename(tmp, filepath.Join(dir, ownerFile)); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// Stale is a temporary data directory RemoveStale found.
type Stale struct {
	// Dir is the directory's path.
	Dir string
	// PID is the process its owner file names; 0 when it has none.
	PID int
	// Removed is true when it was removed: its owner is certainly dead.
	Removed bool
	// Why says why it was kept, for a directory that was not removed and
	// is not a live run's; "" otherwise.
	Why string
}

// RemoveStale looks under parent ("": os.TempDir()) for the temporary
// directories of lwbench runs that did not remove their own (killed by
// SIGKILL, or by a third interrupt) and removes those whose owner is
// certainly dead: the entry is a real directory (not a symlink) named
// EtcdPrefix or APIServerPrefix plus digits, owned by this user, with an owner file
// naming a process that no longer runs (or whose pid now belongs to a
// process started at another time), and no process works in it or holds
// a file of it open. It returns every such directory it
// did not leave for a live run: the ones removed, and the ones it could
// not prove stale (no owner file: an lwbench older than owner files, or a
// run that is just starting; a pid it cannot check) with why, for the
// caller to name, and those still in use by a process (a --cluster-size
// member a killed run left running). Nothing else is touched. An error is
// returned only when parent cannot be read.
func RemoveStale(parent string) ([]Stale, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil, err
	}
	var found []Stale
	for _, e := range entries {
		digits, ok := cutPrefix(e.Name())
		if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" || e.Type()&fs.ModeType != fs.ModeDir {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
			continue // another user's
		}
		pid, start, err := readOwner(dir)
		if err != nil {
			found = append(found, Stale{Dir: dir, Why: err.Error()})
			continue
		}
		switch alive, err := running(pid, start); {
		case err != nil:
			found = append(found, Stale{Dir: dir, PID: pid, Why: err.Error()})
		case alive:
			// A live run's: not ours to touch.
		default:
			s := Stale{Dir: dir, PID: pid}
			if user, name := inUse(dir); user != 0 {
				// A --cluster-size member the killed run started runs on
				// (its own process group): removing its files would
				// free no space and break it.
				s.Why = fmt.Sprintf("still in use by pid %d (%s), which a killed run may have left running: stop it first", user, name)
				found = append(found, s)
				continue
			}
			if err := os.RemoveAll(dir); err != nil {
				s.Why = fmt.Sprintf("remove: %v", err)
			} else {
				s.Removed = true
			}
			found = append(found, s)
		}
	}
	return found, nil
}

// inUse returns a process (pid and command name) whose working directory
// or one of whose open files is dir or under it, as /proc shows them; 0
// when none is seen (or there is no /proc). Processes this user may not
// inspect are not seen.
func inUse(dir string) (int, string) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, ""
	}
	under := func(p string) bool { return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator)) }
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		base := filepath.Join("/proc", p.Name())
		used := false
		if cwd, err := os.Readlink(filepath.Join(base, "cwd")); err == nil && under(cwd) {
			used = true
		}
		if !used {
			fds, _ := os.ReadDir(filepath.Join(base, "fd"))
			for _, fd := range fds {
				if target, err := os.Readlink(filepath.Join(base, "fd", fd.Name())); err == nil && under(target) {
					used = true
					break
				}
			}
		}
		if used {
			name, _ := os.ReadFile(filepath.Join(base, "comm"))
			return pid, strings.TrimSpace(string(name))
		}
	}
	return 0, ""
}

// cutPrefix returns name without the prefix of one of lwbench's
// temporary directories, and whether it had one.
func cutPrefix(name string) (string, bool) {
	for _, p := range prefixes {
		if rest, ok := strings.CutPrefix(name, p); ok {
			return rest, true
		}
	}
	return "", false
}

// readOwner reads dir's owner file: the pid and start time it names.
func readOwner(dir string) (pid int, start string, err error) {
	path := filepath.Join(dir, ownerFile)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", errors.New("no owner file (an lwbench older than owner files, or a run just starting)")
	}
	if err != nil {
		return 0, "", err
	}
	if !fi.Mode().IsRegular() || fi.Size() > ownerFileMaxBytes {
		return 0, "", fmt.Errorf("%s is not an owner file lwbench wrote", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, "", err
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 || !strings.HasPrefix(fields[1], "start=") {
		return 0, "", fmt.Errorf("%s: unreadable owner", path)
	}
	pid, err = strconv.Atoi(strings.TrimPrefix(fields[0], "pid="))
	if err != nil || pid <= 0 {
		return 0, "", fmt.Errorf("%s: unreadable owner", path)
	}
	return pid, strings.TrimPrefix(fields[1], "start="), nil
}

// running reports whether process pid, started at start (clock ticks
// since boot; "" if unknown), still runs. A pid that runs a process
// started at another time is a reused pid: the owner is dead. An error
// when it cannot tell.
func running(pid int, start string) (bool, error) {
	if pid == os.Getpid() {
		return true, nil
	}
	if _, err := processStart(os.Getpid()); err == nil {
		// /proc is there: it lists every process.
		now, err := processStart(pid)
		switch {
		case err == nil:
			return start == "" || now == start, nil
		case errors.Is(err, fs.ErrNotExist):
			return false, nil
		}
		return false, fmt.Errorf("pid %d: %w", pid, err)
	}
	// No /proc: signal 0 tells whether the pid exists.
	switch err := syscall.Kill(pid, 0); {
	case err == nil, errors.Is(err, syscall.EPERM):
		return true, nil
	case errors.Is(err, syscall.ESRCH):
		return false, nil
	default:
		return false, fmt.Errorf("pid %d: %w", pid, err)
	}
}

// processStart returns process pid's start time, field 22 of
// /proc/<pid>/stat (proc(5)), read after the command name, which may hold
// spaces and parentheses.
func processStart(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	// After ") ": field 3 (state) onwards; the start time is field 22.
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	return fields[19], nil
}
