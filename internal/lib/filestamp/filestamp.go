// Package filestamp identifies a version of a file without reading it, for
// caches of files that someone else may rewrite between two reads: a
// card's stem.toml (written from inside a hostile container) or the host's
// state files (written by other stem processes).
//
// A stamp is a regular file's device, inode, size, mtime and ctime. Whoever
// may write a file may also set its mtime back (touch -d), so size and
// mtime prove nothing about content. ctime is the kernel's: every change of
// content or metadata sets it to the current time, and no call sets it to
// anything else (short of setting the host's clock, which a container
// cannot). Device and inode tell a file replaced by rename.
//
// What is left is the grain of the kernel's file clock: two writes within
// one tick may leave the same ctime. So a stamp proves the content it was
// read with only once it is older than its read by more than a tick
// (Settled), as git treats an index entry as "racily clean"; a cache keeps
// reading a file again until then.
package filestamp

import (
	"os"
	"syscall"
	"time"
)

// Stamp is one version of a regular file. The zero Stamp is no file.
type Stamp struct {
	Dev, Ino     uint64
	Size         int64
	Mtime, Ctime int64 // nanoseconds since the epoch
}

// Of is the stamp of fi, the status of a regular file (from Lstat or from
// Stat of an open descriptor); ok is false for anything else.
func Of(fi os.FileInfo) (s Stamp, ok bool) {
	st, isStat := fi.Sys().(*syscall.Stat_t)
	if !isStat || !fi.Mode().IsRegular() {
		return Stamp{}, false
	}
	return fromStat(st), true
}

// Lstat is the stamp of the file at path itself, a final symlink not
// followed (ok is false for a symlink, or when path cannot be read). The
// directories on the way are the caller's to trust.
func Lstat(path string) (s Stamp, ok bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return Stamp{}, false
	}
	return fromStat(&st), true
}

func fromStat(st *syscall.Stat_t) Stamp {
	return Stamp{Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
}

// Grains of the kernel's file clock: fineGrain covers a tick of the coarse
// clock that stamps files (at most 10 ms, at 100 Hz) with room to spare;
// a ctime of whole seconds suggests a file system that keeps only seconds
// (or two, for some), so coarseGrain then.
const (
	fineGrain   = 100 * time.Millisecond
	coarseGrain = 3 * time.Second
)

// Settled reports whether s, taken of a file whose read began at read
// (the time taken before the stamp), can stand for the content read: any
// write after read would have left a later ctime. A stamp that is not
// settled must not be cached.
func (s Stamp) Settled(read time.Time) bool {
	if s == (Stamp{}) {
		return false
	}
	grain := fineGrain
	if s.Ctime%int64(time.Second) == 0 {
		grain = coarseGrain
	}
	return s.Ctime < read.Add(-grain).UnixNano()
}
