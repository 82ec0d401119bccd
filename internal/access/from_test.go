package access

import "testing"

func TestMatchFrom(t *testing.T) {
	for _, c := range []struct {
		pat, ip string
		want    bool
	}{
		{"127.0.0.1", "127.0.0.1", true},
		{"127.0.0.1", "127.0.0.10", false},
		{"10.9.8.7", "127.0.0.1", false},
		{"10.9.8.7,127.0.0.0/8", "127.0.0.1", true},
		{"10.0.0.0/8,192.0.2.*", "127.0.0.1", false},
		{"10.0.0.0/8,192.0.2.*", "192.0.2.55", true},
		{"127.0.0.?", "127.0.0.1", true},
		{"127.0.0.?", "127.0.0.12", false},
		{"!127.0.0.1,*", "127.0.0.1", false},
		{"!127.0.0.1,*", "127.0.0.2", true},
		{"*,!10.0.0.0/8", "10.1.2.3", false},
		{"2001:db8::/32", "2001:db8::1", true},
		{"2001:DB8::1", "2001:db8::1", true},
		{"*.lab.example", "192.0.2.1", false}, // a host name never matches an address (UseDNS no)
		{"*", "203.0.113.9", true},
	} {
		got, err := MatchFrom(c.pat, c.ip)
		if err != nil || got != c.want {
			t.Errorf("MatchFrom(%q, %q) = %v, %v; want %v", c.pat, c.ip, got, err, c.want)
		}
	}
	for _, c := range [][2]string{{"10.0.0.0/99", "10.0.0.1"}, {"a,,b", "10.0.0.1"}, {"*", "not-an-ip"}, {"*", ""}} {
		if ok, err := MatchFrom(c[0], c[1]); err == nil || ok {
			t.Errorf("MatchFrom(%q, %q) = %v, %v; want an error", c[0], c[1], ok, err)
		}
	}
}
