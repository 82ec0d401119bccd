// Package cardgit keeps the card repository's git out of the container's
// reach and lets the student commit through a git that reads nothing the
// container wrote.
//
// Threat model. The card is bind-mounted writable into the task container,
// and everything in the container is untrusted (the student's programs, an
// agent's build). Git on the host runs programs named by its configuration
// (hooks, core.fsmonitor, core.pager, filters, ...) and reads configuration
// from the repository it discovers, so a container that can write the git
// directory, or plant a repository git on the host will discover, makes the
// student's next host-side `git commit` run its code outside the container.
//
// What this package does:
//
//   - Prepare readies the card's .git to be bind-mounted read-only at its
//     own path in the container (internal/instance does the mount; a card
//     that is not a repository gets an empty .git made by stem). A mount
//     point cannot be renamed, replaced or removed from inside (EBUSY) and a
//     read-only mount cannot be written (EROFS) or remounted without
//     CAP_SYS_ADMIN, which containers do not have. The card's own .git is
//     therefore what the host created, whatever ran in the container.
//   - Identity records which .git that is (device and inode, its kind), and
//     Mounted checks, through /proc/PID/root, that a started container got
//     exactly that one (Podman resolves mount sources by path, so a .git
//     swapped before it did would be caught there).
//   - Check reports a .git that is not the recorded one and every nested
//     repository (a .git entry below the card root, or a directory git
//     would take for a bare repository): the container can create those
//     anywhere in the card, and git run on the host inside one uses it.
//   - Commit runs the student's commit with git on the host pinned to the
//     card's recorded .git (--git-dir, identity checked), system config
//     off, hooks, fsmonitor, pagers, editors, external diff, textconv,
//     filters, merge drivers, credential helpers and network protocols
//     disabled, and refuses configuration read from any file the
//     container can write. The container keeps running and can swap any
//     directory for a symlink between a listing and a read, so git never
//     reads the card: stem walks it relative to descriptors with nothing
//     followed (walk.go), reads each file through an O_PATH descriptor
//     whose type it checked, writes the blobs into a quarantine object
//     directory (objects.go), and git builds the tree from a private
//     index with a shadow work tree holding only copies of the card's
//     .gitignore files (stage.go); the tree is checked against what stem
//     read before commit-tree, and the objects move in only then
//     (commitstaged.go). Files, bytes and time are bounded.
//   - Racy names the symlinks and repository pieces the container made,
//     which make plain `git add` on the host racy while it runs.
//
// What it cannot do: stop plain `git`, run by the student on the host inside
// a nested repository the container made, from using it. Check finds such
// repositories (stemctl status and up report them, stem-mcp refuses
// effectful calls), but only the student can avoid running git there.
package cardgit
