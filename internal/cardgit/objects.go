package cardgit

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// quarantine is a private object directory inside the repository's
// objects directory: the commit's objects are written there, git sees it
// as GIT_OBJECT_DIRECTORY with the real one as an alternate, and it is
// moved in only once the commit is made, so a failed commit leaves the
// repository's objects as they were.
type quarantine struct {
	dir, objects string
	format       string // "sha1" or "sha256"
	written      int
}

func newQuarantine(objects, format string) (*quarantine, error) {
	if format != "sha1" && format != "sha256" {
		return nil, fmt.Errorf("the card's repository uses object format %q, which stem cannot write", format)
	}
	dir, err := os.MkdirTemp(objects, "stem-incoming-")
	if err != nil {
		return nil, fmt.Errorf("make a quarantine object directory in %s: %w", objects, err)
	}
	return &quarantine{dir: dir, objects: objects, format: format}, nil
}

// env is what git needs to write into the quarantine and read both.
func (q *quarantine) env() []string {
	return []string{"GIT_OBJECT_DIRECTORY=" + q.dir, "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + q.objects}
}

// blobID is the id git gives a blob holding data.
func (q *quarantine) blobID(data []byte) string {
	var h hash.Hash = sha1.New()
	if q.format == "sha256" {
		h = sha256.New()
	}
	h.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// writeBlob stores data as a loose blob named id (from blobID): what git
// itself writes, a zlib stream of "blob SIZE\0" and the content.
func (q *quarantine) writeBlob(id string, data []byte) error {
	sub := filepath.Join(q.dir, id[:2])
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return err
	}
	var b bytes.Buffer
	z, _ := zlib.NewWriterLevel(&b, zlib.BestSpeed)
	z.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	z.Write(data)
	if err := z.Close(); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(sub, "tmp_obj_")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b.Bytes())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o444)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(sub, id[2:]))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write object %s: %w", id, err)
	}
	q.written++
	return nil
}

// migrate moves every object in the quarantine into the repository's
// objects directory: loose objects one by one, packs with their index
// last (git uses a pack once its .idx is there). An object already
// present is left as it is.
func (q *quarantine) migrate() error {
	ents, err := os.ReadDir(q.dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		src, dst := filepath.Join(q.dir, e.Name()), filepath.Join(q.objects, e.Name())
		files, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		if e.Name() == "pack" {
			sort.Slice(files, func(i, j int) bool {
				return !strings.HasSuffix(files[i].Name(), ".idx") && strings.HasSuffix(files[j].Name(), ".idx")
			})
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		for _, f := range files {
			if strings.HasPrefix(f.Name(), "tmp_") {
				continue
			}
			to := filepath.Join(dst, f.Name())
			if _, err := os.Lstat(to); err == nil {
				continue
			}
			if err := os.Rename(filepath.Join(src, f.Name()), to); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("move object %s into %s: %w", f.Name(), dst, err)
			}
		}
	}
	return nil
}

// remove deletes the quarantine and whatever is left in it.
func (q *quarantine) remove() { os.RemoveAll(q.dir) }
