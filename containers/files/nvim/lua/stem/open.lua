-- stem.open: the task's files, opened in the student's editor when
-- `stemctl up` or `stemctl debug` asks. stemctl writes
--   $STEM_SOCKDIR/nvim-open.json  {"id": "...", "files": ["/card/t4/main.c", ...]}
-- (the manifest's open list, or the editable files). Each request is done
-- once: every file becomes a listed buffer (:ls), and the first is shown
-- only where the editor holds nothing, an empty unnamed buffer, and only
-- when the student is idle in Normal mode (otherwise once they have been
-- idle a while). What the student has open, or has not saved, stays.
local api, uv = vim.api, vim.loop
local view = require('stem.view')
local M = {}

local FILE = 'nvim-open.json'
local MAX = 64 * 1024
local last_id, sockdir

local function read(path)
  local fd = uv.fs_open(path, 'r', 0)
  if not fd then return nil end
  local st = uv.fs_fstat(fd)
  local data = st and st.type == 'file' and st.size <= MAX and uv.fs_read(fd, st.size, 0) or nil
  uv.fs_close(fd)
  return data
end

-- empty: the current window shows a buffer the student has not used.
local function empty()
  local b = api.nvim_get_current_buf()
  return api.nvim_buf_get_name(b) == '' and vim.bo[b].buftype == '' and not vim.bo[b].modified
    and api.nvim_buf_line_count(b) == 1 and api.nvim_buf_get_lines(b, 0, 1, false)[1] == ''
end

local function show_first(f)
  if empty() and uv.fs_stat(f) then
    local old = api.nvim_get_current_buf()
    local ok, err = view.set_buf(0, view.bufadd(f))
    if not ok then
      vim.notify('stem: ' .. err, vim.log.levels.WARN)
      return
    end
    -- The empty buffer it replaces was never the student's: drop it from :ls.
    if #vim.fn.win_findbuf(old) == 0 then pcall(api.nvim_buf_delete, old, {}) end
  end
end

function M.check()
  local data = sockdir and read(sockdir .. '/' .. FILE)
  if not data then return end
  local ok, req = pcall(vim.json.decode, data)
  if not ok or type(req) ~= 'table' or type(req.id) ~= 'string' or type(req.files) ~= 'table' or req.id == last_id then
    return
  end
  last_id = req.id
  local first
  for _, f in ipairs(req.files) do
    if type(f) == 'string' and f:sub(1, 1) == '/' then
      local st = uv.fs_stat(f)
      if st and st.type == 'file' then
        view.bufadd(f)
        first = first or f
      end
    end
  end
  if not first then return end
  if view.idle() then
    show_first(first)
  else
    view.when_idle('open', function() show_first(first) end)
  end
end

function M.setup(dir)
  sockdir = dir
  M.check()
end

M.FILE = FILE
return M
