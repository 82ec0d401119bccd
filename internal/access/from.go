package access

import (
	"fmt"
	"net"
	"strings"
)

// MatchFrom reports whether the client address ip satisfies a grant's from=
// pattern list the way sshd does with its default UseDNS=no (the "host" is
// then the address itself): comma-separated entries, each an address
// wildcard (`*`, `?`) or a CIDR block, any of them negated with `!`. A
// negated entry that matches refuses outright; otherwise one positive match
// is needed. The gate re-checks it so a line that lost its from= option (a
// hand edit) does not widen the grant.
func MatchFrom(patterns, ip string) (bool, error) {
	addr := net.ParseIP(ip)
	if addr == nil {
		return false, fmt.Errorf("client address %q is not an IP address", ip)
	}
	host := strings.ToLower(ip)
	positive := false
	for _, p := range strings.Split(patterns, ",") {
		neg := strings.HasPrefix(p, "!")
		p = strings.ToLower(strings.TrimPrefix(p, "!"))
		if p == "" {
			return false, fmt.Errorf("empty entry in from=%q", patterns)
		}
		var hit bool
		if strings.Contains(p, "/") {
			_, block, err := net.ParseCIDR(p)
			if err != nil {
				return false, fmt.Errorf("from=%q: %q is not a CIDR block", patterns, p)
			}
			hit = block.Contains(addr)
		} else {
			hit = wildcard(p, host)
		}
		if hit && neg {
			return false, nil
		}
		positive = positive || hit
	}
	return positive, nil
}

// wildcard matches s against p, where `*` is any run and `?` one byte.
func wildcard(p, s string) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for i := len(s); i >= 0; i-- {
				if wildcard(p[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
		default:
			if len(s) == 0 || s[0] != p[0] {
				return false
			}
		}
		p, s = p[1:], s[1:]
	}
	return len(s) == 0
}
