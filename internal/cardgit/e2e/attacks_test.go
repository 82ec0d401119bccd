package e2e_test

import "fmt"

// preamble is the start of every attack script, run in the container in
// the card: evil NAME makes a program t1/.e-NAME that appends NAME to the
// canary (a host path, which the container can name but not reach), and
// hooks DIR fills DIR with every hook git runs, each a program that does
// the same. The programs live in the card, so git on the host finds them
// at the same path.
func preamble(canary, httpURL string) string {
	return fmt.Sprintf(`C=$STEM_CARD_PATH
cd "$C" || exit 1
CANARY=%s
STEM_TEST_HTTP=%s
evil() {
	# A pager reads its input to the end (else git dies of SIGPIPE
	# before it gets to what else the test waits for).
	drain=; [ "$2" = drain ] && drain='cat >/dev/null'
	printf '#!/bin/sh\necho "%%s $*" >> %%s\n%%s\nexit 0\n' "$1" "$CANARY" "$drain" > "$C/t1/.e-$1"
	chmod +x "$C/t1/.e-$1"
	echo "$C/t1/.e-$1"
}
hooks() {
	mkdir -p "$1" || return 1
	for h in pre-commit prepare-commit-msg commit-msg post-commit pre-merge-commit post-checkout post-merge pre-push pre-rebase post-rewrite reference-transaction pre-auto-gc post-index-change; do
		printf '#!/bin/sh\n%%s %%s\n' "$(evil hook-$h)" "$h" > "$1/$h" && chmod +x "$1/$h" || return 1
	done
}
# newgit gives the git directory at the card root the container's own
# content: written in place if it can, else .git moved aside and a copy
# put in its place (the issue's first route).
newgit() {
	if git config stem.probe 1 2>/dev/null && touch .git/hooks/.probe 2>/dev/null; then
		git config --unset stem.probe; rm -f .git/hooks/.probe; return 0
	fi
	mv .git .git-old && cp -a .git-old .git && chmod -R u+w .git
}
setcfg() {
	git config "$1" "$2" 2>/dev/null && return 0
	newgit && git config "$1" "$2"
}
`, q(canary), q(httpURL))
}

// Routes: each attack is a script for the container. want lists what the
// canary holds once the control has run and the battery has run after it.
type route struct {
	name   string
	attack string
	want   []string
	// control is what the student runs on the host in the control's
	// card (default: the whole battery).
	control string
}

var routes = []route{
	{
		// The route 1: .git moved aside, a copy with hooks put
		// in its place (hooks and config were mounted on the old path).
		name: "replace",
		attack: `newgit
hooks .git/hooks
`,
		want: []string{"hook-pre-commit", "hook-post-checkout", "hook-pre-push"},
	},
	{
		// .git swapped for a "gitdir:" file naming a directory the
		// container prepared.
		name: "gitfile",
		attack: `cp -a .git .evil 2>/dev/null || mkdir .evil
hooks .evil/hooks
mv .git .git-old && printf 'gitdir: .evil\n' > .git
`,
		want: []string{"hook-pre-commit"},
	},
	{
		// .git swapped for a symlink to a directory the container prepared.
		name: "symlink",
		attack: `cp -a .git .evil 2>/dev/null || mkdir .evil
hooks .evil/hooks
mv .git .git-old && ln -s .evil .git
`,
		want: []string{"hook-pre-commit"},
	},
	{
		// Configuration that runs programs, written wherever git reads
		// it: .git/config, .git/config.worktree, or the replaced .git.
		name: "config",
		attack: `hooks "$C/t1/.hooks"
printf '* diff=y filter=x merge=m\n' > .gitattributes
setcfg core.hooksPath "$C/t1/.hooks"
setcfg core.fsmonitor "$(evil fsmonitor)"
setcfg core.pager "$(evil pager drain)"
setcfg core.editor "$(evil editor)"
setcfg core.sshCommand "$(evil sshCommand)"
setcfg remote.origin.url ssh://git.invalid/card.git
setcfg remote.origin.pushurl "$STEM_TEST_HTTP/card.git"
setcfg credential.helper "$(evil credential)"
setcfg diff.y.textconv "$(evil textconv)"
setcfg filter.x.clean "$(evil filter-clean)"
setcfg filter.x.smudge "$(evil filter-smudge)"
setcfg merge.m.driver "$(evil merge) %O %A %B"
setcfg alias.status "!$(evil alias)"
git config --file .git/config.worktree core.pager "$(evil worktree-pager drain)" 2>/dev/null
`,
		want: []string{"hook-pre-commit", "fsmonitor", "pager", "editor", "sshCommand", "credential", "textconv", "filter-clean"},
	},
	{
		// A merge driver, an alias that runs a program (git takes an
		// alias only for a name that is not a command: a student's
		// "git st"), and configuration in config.worktree (read once
		// extensions.worktreeConfig is on), each where nothing else of
		// the config route hides it.
		name: "drivers",
		attack: `printf '* merge=m\n' > .gitattributes
setcfg merge.m.driver "$(evil merge) %O %A %B"
setcfg alias.st "!$(evil alias)"
setcfg extensions.worktreeConfig true
git config --file .git/config.worktree core.pager "$(evil worktree-pager drain)" 2>/dev/null
`,
		want: []string{"merge", "alias", "worktree-pager"},
	},
	{
		// diff.external alone (with it set, textconv is not used).
		name: "extdiff",
		attack: `setcfg diff.external "$(evil external-diff)"
`,
		want: []string{"external-diff"},
	},
	{
		// include and includeIf naming files in the work tree.
		name: "include",
		attack: `hooks "$C/t1/.hooks"
printf '[core]\n\thooksPath = %s\n' "$C/t1/.hooks" > "$C/t1/.inc"
printf '[core]\n\tpager = %s\n' "$(evil includeif-pager drain)" > "$C/t1/.inc2"
setcfg include.path "$C/t1/.inc"
setcfg "includeIf.gitdir:$C/.path" "$C/t1/.inc2"
`,
		want: []string{"hook-pre-commit", "includeif-pager"},
	},
	{
		// A submodule whose path the container made a repository, with a
		// gitlink in the index (the index lives in .git too) to a commit
		// other than its HEAD, so git submodule update checks it out.
		// (update = !command in .gitmodules git refuses by itself.)
		name: "submodule",
		attack: `printf '[submodule "sub"]\n\tpath = sub\n\turl = ./sub\n' > .gitmodules
git init -q sub && hooks sub/.git/hooks
git -C sub -c user.name=x -c user.email=x@x commit -q --allow-empty -m A
a=$(git -C sub rev-parse HEAD)
git -C sub -c user.name=x -c user.email=x@x commit -q --allow-empty -m B
git update-index --add --cacheinfo "160000,$a,sub" || { newgit && git update-index --add --cacheinfo "160000,$a,sub"; }
`,
		want:    []string{"hook-post-checkout"},
		control: "git submodule update --init",
	},
}

// nestedAttack plants repositories git on the host would use below the
// card root: a .git directory (with an fsmonitor, which git in the card
// root runs once the repository is staged as an embedded one), a .git
// file naming it, a bare repository with a work tree, one in stem's own
// state directory.
const nestedAttack = `git init -q t1/x && hooks t1/x/.git/hooks && git -C t1/x config core.fsmonitor "$(evil fsmonitor)"
mkdir -p t2/y && printf 'gitdir: %s\n' "$C/t1/x/.git" > t2/y/.git
git init -q --bare t1/bare && git -C t1/bare config core.bare false && git -C t1/bare config core.worktree "$C/t1" && hooks t1/bare/hooks
mkdir -p .stem/instances/zz && git init -q .stem/instances/zz
`

// swapLoop exchanges .git with a directory the container made, as fast
// as it can, LIMIT times or until /tmp/stem-stop exists: a sibling
// instance racing Podman's resolution of the mount source by path. It
// prints how many swaps worked and leaves the real .git in place.
const swapLoop = `mkdir -p .gswap
n=0; i=0
while [ $i -lt "$LIMIT" ] && [ ! -e /tmp/stem-stop ]; do
	if mv .git .g1; then mv .gswap .git; mv .g1 .gswap; n=$((n+1)); fi
	i=$((i+1))
done 2>/tmp/swap.err
[ -d .gswap/objects ] && { mv .git .gtmp; mv .gswap .git; mv .gtmp .gswap; }
rmdir .gswap 2>/dev/null
echo "tries=$i swaps=$n"
sort -u /tmp/swap.err
`
