-- stem: the student's editor in a stem task container. Started by
-- plugin/stem.lua in the Neovim that stem-init runs on $STEM_SOCKDIR/n.sock
-- (no other Neovim in the container), it watches that socket directory:
--   g.sock          the debug layout's gdb bridge: stem.debug follows it
--   nvim-open.json  files stemctl asks the editor to open: stem.open
-- and defines the commands for edits agents propose (stem.proposals).
local uv = vim.loop
local M = {}

function M.setup(dir)
  if M.dir then return end
  M.dir = dir
  local debug, open, view = require('stem.debug'), require('stem.open'), require('stem.view')
  vim.on_key(view.on_key)
  -- inotify tells us when either file appears or is replaced (both are
  -- renamed into place); a slow poll covers a watch that failed. Both run
  -- in libuv's callbacks: connect needs no editor API, and nothing is put
  -- on the main loop unless there is work, since any event there restarts
  -- the 'updatetime' wait that the student's CursorHold autocommands need.
  local w = uv.new_fs_event()
  if w then
    w:start(dir, {}, function(err, name)
      if err then return end
      if name == 'g.sock' then
        debug.connect()
      elseif name == open.FILE then
        vim.schedule(open.check)
      end
    end)
  end
  local t = uv.new_timer()
  t:start(2000, 2000, function() debug.connect() end)
  M.watch, M.timer = w, t
  -- Events that arrive meanwhile wait for the main loop, so neither file
  -- can appear unnoticed between these checks and the watch.
  debug.setup(dir)
  local ok, err = pcall(open.setup, dir)
  if not ok then vim.notify('stem: ' .. tostring(err), vim.log.levels.WARN) end
  ok, err = pcall(require('stem.proposals').setup)
  if not ok then vim.notify('stem: ' .. tostring(err), vim.log.levels.WARN) end
end

return M
