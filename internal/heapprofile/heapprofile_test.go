package heapprofile

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// readProfile returns the decompressed bytes of a written profile, failing
// unless it is a gzip stream (pprof's profile.proto).
func readProfile(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s is not a gzipped profile: %v", path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var retained [][]byte

func TestWritesAtGrowthAndAtStop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.pprof")
	r, err := Start(path)
	if err != nil {
		t.Fatal(err)
	}
	// 64 MiB kept live: the live heap passes 16 MiB at the next GC.
	for range 64 {
		retained = append(retained, make([]byte, 1<<20))
	}
	runtime.GC()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		n := r.written
		r.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no profile written 10 s after the live heap reached 64 MiB")
		}
		time.Sleep(50 * time.Millisecond)
	}
	written, err := r.Stop(true)
	if err != nil || written < 1 {
		t.Fatalf("Stop: %d written, %v", written, err)
	}
	// The allocating function is in the profile's string table.
	if b := readProfile(t, path); !bytes.Contains(b, []byte("TestWritesAtGrowthAndAtStop")) {
		t.Error("the profile does not name the function that holds the heap")
	}
	retained = nil
	// No temporary file is left beside it.
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want the profile alone", len(entries))
	}
}

func TestStopWritesASmallHeap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.pprof")
	r, err := Start(path)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.lastBytes = 1 << 62 // no growth can pass it: only Stop writes
	r.mu.Unlock()
	if written, err := r.Stop(true); err != nil || written != 1 {
		t.Fatalf("Stop: %d written, %v; want 1", written, err)
	}
	readProfile(t, path)

	// A command that did not run leaves no file.
	path = filepath.Join(t.TempDir(), "heap.pprof")
	if r, err = Start(path); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.lastBytes = 1 << 62
	r.mu.Unlock()
	if written, err := r.Stop(false); err != nil || written != 0 {
		t.Fatalf("Stop(false): %d written, %v; want 0", written, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("Stop(false) left %s (stat: %v)", path, err)
	}
}

func TestRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	for path, want := range map[string]string{
		dir:                                    "not a regular file",
		os.DevNull:                             "not a regular file",
		filepath.Join(dir, "missing", "heap"):  "no such file",
		filepath.Join(os.DevNull, "heap.prof"): "not a directory",
	} {
		if r, err := Start(path); err == nil {
			r.Stop(false)
			t.Errorf("Start(%s) accepted", path)
		} else if !strings.Contains(err.Error(), want) {
			t.Errorf("Start(%s): %v, want %q", path, err, want)
		}
	}
}
