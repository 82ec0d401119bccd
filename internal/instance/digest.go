package instance

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/stem-edu/stem/internal/lib/filestamp"
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

// cached is a binary's digest as of one stamp of the file.
type cached struct {
	filestamp.Stamp
	SHA256 string
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
	stamp, ok := filestamp.Of(fi)
	entries := map[string]cached{}
	if ok && cache != "" {
		if data, err := os.ReadFile(cache); err == nil {
			json.Unmarshal(data, &entries)
		}
		if e, hit := entries[path]; hit && e.SHA256 != "" && e.Stamp == stamp {
			return "sha256:" + e.SHA256
		}
	}
	sum, after, err := digestFile(path)
	if err != nil {
		return ""
	}
	// Only a file that did not change while it was read is remembered.
	if ok && after == stamp && cache != "" {
		if len(entries) >= maxDigests {
			entries = map[string]cached{}
		}
		entries[path] = cached{Stamp: stamp, SHA256: sum}
		// A cache: writing it is best effort.
		if data, err := json.Marshal(entries); err == nil && os.MkdirAll(filepath.Dir(cache), 0o700) == nil {
			sockets.WriteFileAtomic(cache, data, 0o600)
		}
	}
	return "sha256:" + sum
}

// digestFile hashes path and returns the stamp of the file it read.
func digestFile(path string) (string, filestamp.Stamp, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", filestamp.Stamp{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", filestamp.Stamp{}, fmt.Errorf("read %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return "", filestamp.Stamp{}, err
	}
	stamp, _ := filestamp.Of(fi)
	return hex.EncodeToString(h.Sum(nil)), stamp, nil
}
