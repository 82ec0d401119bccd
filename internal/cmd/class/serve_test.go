package class

import "testing"

// Only loopback addresses pass without the warning; a name other than
// localhost may resolve anywhere.
func TestServeListenLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:0": true, "127.9.9.9:80": true, "[::1]:8080": true, "localhost:0": true,
		"0.0.0.0:0": false, "[::]:0": false, ":8080": false, "192.0.2.1:80": false, "lab.example:80": false,
	} {
		got, err := isLoopback(addr)
		if err != nil || got != want {
			t.Errorf("isLoopback(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
	if _, err := isLoopback("no-port"); err == nil {
		t.Error("an address without a port passed")
	}
}
