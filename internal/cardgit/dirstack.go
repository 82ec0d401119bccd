package cardgit

import "golang.org/x/sys/unix"

// dirAt is a directory a walk has yet to read: a descriptor opened
// relative to the one above it, and its path below the card.
type dirAt struct {
	fd  int
	rel string
}

// dirStack holds a walk's directories yet to read. Only the card's root
// is opened by path; every directory below it through the descriptor of
// the one above, nothing followed, so one the container swaps for a
// symlink meanwhile fails to open instead of leading out of the card.
type dirStack []dirAt

// openCard starts a walk at the card's root.
func openCard(card string) (dirStack, error) {
	root, err := unix.Open(card, dirFlags&^unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	return dirStack{{root, ""}}, nil
}

// pop takes the next directory to read; the caller closes it.
func (s *dirStack) pop() dirAt {
	d := (*s)[len(*s)-1]
	*s = (*s)[:len(*s)-1]
	return d
}

// enter adds the directory name in d, whose path below the card is rel.
// One swapped for a symlink, or gone, is left out: nothing to follow.
func (s *dirStack) enter(d dirAt, name, rel string) {
	if fd, err := unix.Openat(d.fd, name, dirFlags, 0); err == nil {
		*s = append(*s, dirAt{fd, rel})
	}
}

// close closes the directories a walk that ends early leaves.
func (s *dirStack) close() {
	for _, d := range *s {
		unix.Close(d.fd)
	}
	*s = nil
}

// typeIn is e's type, asked of the directory dfd when getdents did not
// say.
func (e dirent) typeIn(dfd int) uint8 {
	if e.typ == unix.DT_UNKNOWN {
		return typeAt(dfd, e.name)
	}
	return e.typ
}
