// Package inputfile opens the files a user names on the command line:
// regular files only, never blocking in open(2), with a stated size limit.
//
// A FIFO, a device, a socket or a directory where a regular file is meant
// is refused with an error that says what the path is ("is a FIFO");
// /dev/zero or a FIFO would otherwise be read forever or block open(2)
// forever, beyond the reach of SIGINT. Symbolic links are followed, as
// every tool does; Open reports whether it followed one.
package inputfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is returned (wrapped, naming the path and what it is) for a
// path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned (wrapped, naming the path, its size and the
// limit) for a file larger than the limit its reader states.
var ErrTooLarge = errors.New("larger than the limit")

// Describe returns what a file of mode m is, in the words an error
// message uses: "a directory", "a FIFO", "a character device"...
func Describe(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeIrregular != 0:
		return "an irregular file"
	}
	return "a " + m.Type().String() + " file"
}

// Opened is a regular file Open opened for reading.
type Opened struct {
	*os.File
	// Info is the file's fstat(2) after open, not the path's stat before
	// it: what was opened, even if the path changed meanwhile.
	Info fs.FileInfo
	// Symlink is true when path was a symbolic link that Open followed.
	Symlink bool
}

// Open opens path read-only without blocking (O_NONBLOCK: a FIFO's open
// returns at once instead of waiting for a writer) and returns it only if
// it is a regular file of at most maxBytes bytes (no limit when maxBytes
// is negative). Errors name path and wrap the operating system's error
// (fs.ErrPermission, fs.ErrNotExist...), ErrNotRegular or ErrTooLarge.
func Open(path string, maxBytes int64) (*Opened, error) {
	link := false
	if li, err := os.Lstat(path); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		link = true
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: is %s, %w", path, Describe(fi.Mode()), ErrNotRegular)
	}
	if maxBytes >= 0 && fi.Size() > maxBytes {
		f.Close()
		return nil, fmt.Errorf("%s: %d bytes, %w of %d bytes for this file", path, fi.Size(), ErrTooLarge, maxBytes)
	}
	return &Opened{File: f, Info: fi, Symlink: link}, nil
}

// Read returns the contents of the regular file at path, of at most
// maxBytes bytes (see Open). A file that grows past maxBytes while it is
// read is refused with ErrTooLarge, so no more than maxBytes+1 bytes are
// ever held.
func Read(path string, maxBytes int64) ([]byte, error) {
	f, err := Open(path, maxBytes)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > maxBytes {
		return nil, fmt.Errorf("%s: grew while read, %w of %d bytes for this file", path, ErrTooLarge, maxBytes)
	}
	return b, nil
}
