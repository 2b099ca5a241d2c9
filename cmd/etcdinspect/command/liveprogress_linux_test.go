//go:build linux

package command_test

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/cmd/etcdinspect/command"
	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// openPTY opens a pseudo-terminal pair (/dev/ptmx, then its /dev/pts/N
// unlocked), closed when the test ends.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlock pty: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("pty number: %v", e)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return master, tty
}

// TestLiveProgressBar: a live scan draws its progress bar on stderr when
// it is a terminal, and erases it before the result is printed; on any
// other stderr nothing is drawn (TestLiveMember).
func TestLiveProgressBar(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	for b := range 20 {
		var ops []clientv3.Op
		for i := range 100 {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/registry/configmaps/ns%02d/cm%02d", b, i), "v"))
		}
		if _, err := c.Txn(t.Context()).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"usage", "--values"}, {"keys"}} {
		t.Run(args[0], func(t *testing.T) {
			master, tty := openPTY(t)
			drawn := make(chan string)
			go func() {
				b, _ := io.ReadAll(master)
				drawn <- string(b)
			}()
			root := command.NewRootCommand()
			var out strings.Builder
			root.SetOut(&out)
			root.SetErr(tty)
			// One key per Range: a scan long enough for the bar's first
			// redraw (100 ms).
			root.SetArgs(append(args, "--max-keys-per-request", "1", "--endpoints", strings.Join(srv.Endpoints, ",")))
			if err := root.ExecuteContext(t.Context()); err != nil {
				t.Fatal(err)
			}
			tty.Close()
			bar := <-drawn
			if !strings.Contains(bar, "reading the keys of") || !strings.Contains(bar, "%") || !strings.HasSuffix(bar, "\r\033[K") {
				t.Errorf("got stderr %q, want a progress bar, erased at the end", bar)
			}
			if !strings.Contains(out.String(), "Source: live") {
				t.Errorf("got stdout %q, want the live result", out.String())
			}
		})
	}
}
