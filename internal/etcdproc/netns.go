package etcdproc

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
)

// Network namespaces let a test cut one member off from its peers and its
// clients with a real link failure, not a paused process. Each member runs
// in a namespace of its own, joined to a bridge in this process's namespace
// by a veth pair; Partition takes the member's end of the link down, Heal
// brings it back. Everything is created with iproute2 (`ip netns`, `ip
// link`) under names unique to the cluster, on a private 10.77.x.0/24
// subnet that never leaves the machine, and deleted by Stop.

// ErrNoNetns is returned when this machine does not allow network
// namespaces (no iproute2, or not allowed to create namespaces).
var ErrNoNetns = errors.New("network namespaces unavailable")

// netnsLayout is the namespaces, links and addresses of one cluster.
type netnsLayout struct {
	id     string // short random id in every name
	bridge string
	subnet string // e.g. "10.77.42"
	// per member
	ns, hostIf, nsIf, ip []string
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// CheckNetns reports whether this machine lets us create network
// namespaces, by creating and deleting one; the error wraps ErrNoNetns and
// says why not.
func CheckNetns() error {
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: iproute2's ip command not found", ErrNoNetns)
	}
	name := "ekprobe" + randomID(3)
	if err := ipCmd("netns", "add", name); err != nil {
		return fmt.Errorf("%w: %v", ErrNoNetns, err)
	}
	return ipCmd("netns", "delete", name)
}

func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// usedSubnets returns the third octets of 10.77.x.0/24 routes already on
// this machine (another cluster's bridge).
func usedSubnets() map[string]bool {
	used := map[string]bool{}
	ifaces, err := net.Interfaces()
	if err != nil {
		return used
	}
	for _, ifc := range ifaces {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if ip4 := ipn.IP.To4(); ip4 != nil && ip4[0] == 10 && ip4[1] == 77 {
					used[fmt.Sprint(ip4[2])] = true
				}
			}
		}
	}
	return used
}

// setupNetns creates the bridge and one namespace per member. On error it
// removes what it created.
func setupNetns(members int) (*netnsLayout, error) {
	if err := CheckNetns(); err != nil {
		return nil, err
	}
	l := &netnsLayout{id: randomID(3)}
	l.bridge = "ekb" + l.id
	used := usedSubnets()
	var octet int
	b := make([]byte, 1)
	for tries := 0; ; tries++ {
		rand.Read(b)
		octet = 1 + int(b[0])%250
		if !used[fmt.Sprint(octet)] {
			break
		}
		if tries > 500 {
			return nil, fmt.Errorf("%w: no free 10.77.x.0/24 subnet", ErrNoNetns)
		}
	}
	l.subnet = fmt.Sprintf("10.77.%d", octet)
	steps := [][]string{
		{"link", "add", l.bridge, "type", "bridge"},
		{"addr", "add", l.subnet + ".1/24", "dev", l.bridge},
		{"link", "set", l.bridge, "up"},
	}
	for i := range members {
		ns := fmt.Sprintf("ek%sm%d", l.id, i)
		host := fmt.Sprintf("ek%sh%d", l.id, i)
		peer := fmt.Sprintf("ek%sp%d", l.id, i)
		ip := fmt.Sprintf("%s.%d", l.subnet, 10+i)
		l.ns, l.hostIf, l.nsIf, l.ip = append(l.ns, ns), append(l.hostIf, host), append(l.nsIf, peer), append(l.ip, ip)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"link", "add", host, "type", "veth", "peer", "name", peer},
			[]string{"link", "set", peer, "netns", ns},
			[]string{"link", "set", host, "master", l.bridge},
			[]string{"link", "set", host, "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"-n", ns, "addr", "add", ip + "/24", "dev", peer},
			[]string{"-n", ns, "link", "set", peer, "up"},
			[]string{"-n", ns, "route", "add", "default", "via", l.subnet + ".1"},
		)
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			l.teardown()
			return nil, err
		}
	}
	return l, nil
}

// teardown deletes the namespaces (which deletes their veth pairs) and the
// bridge. It ignores what is already gone.
func (l *netnsLayout) teardown() {
	for _, ns := range l.ns {
		ipCmd("netns", "delete", ns)
	}
	ipCmd("link", "delete", l.bridge)
}
