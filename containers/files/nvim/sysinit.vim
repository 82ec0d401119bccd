" stem: system-wide Neovim defaults for task containers, installed as
" /etc/xdg/nvim/sysinit.vim. It runs before the student's own init.vim.
"
" This is the student's editor, so it holds only what safety needs: each line
" closes a way for a file's *contents* to run code or change the editor. AI
" agents open files they did not write, and card repositories come from
" others. Nothing here changes keys, looks or plugins; the student's config
" may still override any of it deliberately.

" Modelines let a file set options when it is opened; they have run code
" before (CVE-2019-12735) and can still change options the student relies on.
set nomodeline
" Even where modelines are turned back on, never let them set expression
" options ('foldexpr', 'includeexpr', ...). Off by default; stated on purpose.
set nomodelineexpr
" A .nvimrc/.exrc in a card repository would run as the student whenever
" Neovim starts there. Off by default; stated on purpose.
set noexrc
" If 'exrc' is turned on anyway, local rc files may not run shell commands,
" autocommands or write files.
set secure
" Neovim's gzip, tar and zip plugins take over reading any file whose name
" ends in .gz, .bz2, .xz, .Z, .zst, .tar, .tgz, .zip, .jar, ... and run
" gzip, tar or unzip on it: opening a file would start programs on contents
" someone else chose (tar.vim and zip.vim have had shell injections through
" crafted archives). stem opens files without read autocommands anyway; this
" keeps the student's own :edit from doing it too.
let g:loaded_gzip = 1
let g:loaded_tarPlugin = 1
let g:loaded_zipPlugin = 1
" The spellfile plugin offers to download a missing spell file (through
" netrw, with curl or wget). Task containers have no network, so it could
" only start programs that fail.
let g:loaded_spellfile_plugin = 1
" netrw stays: it runs programs only for URL names (scp://, http://, ...),
" which stem never opens, and students browse directories with :Explore.
