package inputfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(big, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		max     int64
		wantErr error
		wantMsg string
	}{
		{"fifo", fifo, 10, ErrNotRegular, "is a FIFO"},
		{"directory", dir, 10, ErrNotRegular, "is a directory"},
		{"dev zero", "/dev/zero", 10, ErrNotRegular, "is a character device"},
		{"too large", big, 99, ErrTooLarge, "100 bytes"},
		{"missing", filepath.Join(dir, "none"), 10, fs.ErrNotExist, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := Read(tt.path, tt.max); done <- err }()
			select {
			case err := <-done:
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Fatalf("got %v, want %v containing %q", err, tt.wantErr, tt.wantMsg)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Read blocked")
			}
		})
	}
	f, err := Open(link, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Symlink || f.Info.Size() != 100 {
		t.Fatalf("got symlink %v size %d, want true 100", f.Symlink, f.Info.Size())
	}
}
