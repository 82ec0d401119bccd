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
