// Package swaptest plays the container in tests of host-side code that
// works in a directory the container can write: it swaps a real directory
// and a symlink to a directory outside, as fast as it can.
package swaptest

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// Swap exchanges dir with a new symlink to target (named dir+".swap")
// with RENAME_EXCHANGE, so both names exist at every moment, until stop is
// called (also at the end of the test). After stop, dir is the real
// directory again.
func Swap(t testing.TB, dir, target string) (stop func()) {
	t.Helper()
	link := dir + ".swap"
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	var halt atomic.Bool
	var wg sync.WaitGroup
	var n int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !halt.Load() {
			if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("swap %s: %v", dir, err)
				return
			}
			n++
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			halt.Store(true)
			wg.Wait()
			if n%2 == 1 {
				unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
			}
			os.Remove(link)
		})
	}
	t.Cleanup(stop)
	return stop
}
