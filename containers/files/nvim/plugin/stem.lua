-- stem: starts the debugger view, the task's files and the commands for edits agents propose (lua/stem/init.lua)
-- in the session's editor only: the Neovim listening on $STEM_SOCKDIR/n.sock
-- that stem-init starts. Any other Neovim in the container is left alone.
if vim.g.loaded_stem then return end
vim.g.loaded_stem = 1

local function start()
  local dir = vim.env.STEM_SOCKDIR
  if not dir or dir == '' or vim.v.servername ~= dir .. '/n.sock' then return end
  local ok, err = pcall(require('stem').setup, dir)
  if not ok then vim.notify('stem: ' .. tostring(err), vim.log.levels.ERROR) end
end

if vim.v.vim_did_enter == 1 then
  start()
else
  -- nested: opening the task's files runs their autocommands (filetype,
  -- syntax, SwapExists) as an :edit would.
  vim.api.nvim_create_autocmd('VimEnter', { once = true, nested = true, callback = start })
end
