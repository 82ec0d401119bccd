package instance

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/stem-edu/stem/internal/sockets"
)

// DefaultDigestCache is the file, in the user's cache directory
// ($XDG_CACHE_HOME/stem or ~/.cache/stem), that remembers the digest of
// each stem-mcp binary by the file's stamp, so that a command reads the
// binary again only after it changed.
func DefaultDigestCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "stem", "mcp-digest.json")
}

// maxDigests bounds the cache (one entry per binary path seen).
const maxDigests = 8

// fileStamp is what identifies a file's content without reading it: a
// rewrite changes its size, mtime or ctime (ctime cannot be set back), a
// replacement its device and inode.
type fileStamp struct {
	Dev, Ino, Size   uint64
	MtimeNs, CtimeNs int64
	SHA256           string `json:",omitempty"`
}

func stampOf(fi os.FileInfo) (fileStamp, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStamp{}, false
	}
	return fileStamp{Dev: uint64(st.Dev), Ino: st.Ino, Size: uint64(st.Size),
		MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano()}, true
}

// binaryIdentity is the configuration hash's identity of the stem-mcp
// binary mounted into containers: a digest of its content, so an identical
// binary installed again (a second make build, a package upgrade that
// changes nothing) does not make every instance "must be re-created". The
// digest is cached by the file's stamp in cache (DefaultDigestCache; "" for
// none); without a usable cache the binary is read each time. It is ""
// when the binary cannot be read.
func binaryIdentity(cache, path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	stamp, ok := stampOf(fi)
	entries := map[string]fileStamp{}
	if ok && cache != "" {
		if data, err := os.ReadFile(cache); err == nil {
			json.Unmarshal(data, &entries)
		}
		if e, hit := entries[path]; hit && e.SHA256 != "" {
			want := e
			want.SHA256 = ""
			if want == stamp {
				return "sha256:" + e.SHA256
			}
		}
	}
	sum, after, err := digestFile(path)
	if err != nil {
		return ""
	}
	// Only a file that did not change while it was read is remembered.
	if ok && after == stamp && cache != "" {
		stamp.SHA256 = sum
		if len(entries) >= maxDigests {
			entries = map[string]fileStamp{}
		}
		entries[path] = stamp
		// A cache: writing it is best effort.
		if data, err := json.Marshal(entries); err == nil && os.MkdirAll(filepath.Dir(cache), 0o700) == nil {
			sockets.WriteFileAtomic(cache, data, 0o600)
		}
	}
	return "sha256:" + sum
}

// digestFile hashes path and returns the stamp of the file it read.
func digestFile(path string) (string, fileStamp, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fileStamp{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fileStamp{}, fmt.Errorf("read %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return "", fileStamp{}, err
	}
	stamp, _ := stampOf(fi)
	return hex.EncodeToString(h.Sum(nil)), stamp, nil
}
