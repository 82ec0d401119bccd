package instance

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/workspace"
)

// EditorOpen is the request stemctl leaves in the socket directory for the
// student's Neovim: the task's files to open. The editor's stem plugin
// (containers/files/nvim/lua/stem/open.lua) watches for it, opens each
// file as a listed buffer, and shows the first only where the editor holds
// nothing yet; it never replaces what the student has open or unsaved.
// stemctl only writes the file (below the socket directory, nothing
// followed); it never reads what the container may have put there.
const EditorOpen = "nvim-open.json"

// OpenRequest is EditorOpen's content.
type OpenRequest struct {
	// ID is new for every request; the editor does each once.
	ID string `json:"id"`
	// Files are absolute paths inside the card (the same inside the
	// container), the one to show first.
	Files []string `json:"files"`
}

// OpenTaskFiles asks the instance's editor to open the task's files (the
// manifest's open list, or its editable files). `up` and `debug` call it;
// commands that only use an instance (build, agent start) do not. It
// returns the files asked for.
func OpenTaskFiles(rec registry.Record, r *workspace.Resolved) ([]string, error) {
	files := r.OpenFiles()
	if len(files) == 0 {
		return nil, nil
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("open the task's files: %w", err)
	}
	req := OpenRequest{ID: hex.EncodeToString(b), Files: files}
	if err := sockets.WriteJSON(rec.Dir().Path, EditorOpen, req); err != nil {
		return nil, fmt.Errorf("ask the editor of %s to open the task's files: %w", rec.Instance, err)
	}
	return files, nil
}
