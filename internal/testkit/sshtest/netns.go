package sshtest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"strings"
)

// makeNamespace makes a network namespace joined to this one by a veth
// pair on a /30 of 10.0.0.0/8 that no interface uses yet, and returns the
// address sshd listens on inside it (port 22, which nothing else in a
// fresh namespace holds). It needs root and iproute2's ip.
func (h *Host) makeNamespace() (string, error) {
	if os.Geteuid() != 0 {
		return "", errors.New("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "", err
	}
	used, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return "", fmt.Errorf("listing addresses: %w", err)
	}
	var prefix string
	for range 20 {
		a, _ := rand.Int(rand.Reader, big.NewInt(50))
		b, _ := rand.Int(rand.Reader, big.NewInt(256))
		p := fmt.Sprintf("10.%d.%d.", 200+a.Int64(), b.Int64())
		if !strings.Contains(string(used), " "+p) {
			prefix = p
			break
		}
	}
	if prefix == "" {
		return "", errors.New("no free 10.x.y.0/30 for a veth pair")
	}
	ns, outer, inner := "mstssh-"+h.ID, "ms"+h.ID+"a", "ms"+h.ID+"b"
	steps := [][]string{
		{"netns", "add", ns},
		{"link", "add", outer, "type", "veth", "peer", "name", inner},
		{"link", "set", inner, "netns", ns},
		{"addr", "add", prefix + "1/30", "dev", outer},
		{"link", "set", outer, "up"},
		{"-n", ns, "addr", "add", prefix + "2/30", "dev", inner},
		{"-n", ns, "link", "set", inner, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	}
	for i, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			if i > 0 {
				h.Namespace, h.veth = ns, outer
				h.removeNamespace()
				h.Namespace, h.veth = "", ""
			}
			return "", fmt.Errorf("ip %s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	h.Namespace, h.veth = ns, outer
	return prefix + "2:22", nil
}

// removeNamespace deletes the veth pair (its peer goes with it) and the
// namespace.
func (h *Host) removeNamespace() error {
	var errs []error
	if h.veth != "" {
		if out, err := exec.Command("ip", "link", "del", h.veth).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
			errs = append(errs, fmt.Errorf("ip link del %s: %v: %s", h.veth, err, strings.TrimSpace(string(out))))
		}
	}
	if out, err := exec.Command("ip", "netns", "del", h.Namespace).CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("ip netns del %s: %v: %s", h.Namespace, err, strings.TrimSpace(string(out))))
	}
	return errors.Join(errs...)
}
