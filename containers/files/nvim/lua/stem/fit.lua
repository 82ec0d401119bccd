-- stem.fit: make stem's notes fit the window they are shown in. Virtual
-- lines and end-of-line text are never wrapped by Neovim: what does not
-- fit is cut at the window's edge, and in a narrow pane that was the part
-- telling the student what to do. Text given here is already displayable
-- (stem.proposals' shown).
local api, fn = vim.api, vim.fn
local M = {}

local MIN = 20 -- narrower than this, cutting is all that is left

local dw = fn.strdisplaywidth

-- width is the text width (without sign and number columns) of the
-- narrowest window showing buf, or of the screen when none does. Two
-- cells are kept for a sign column that a sign placed with the text
-- brings ('signcolumn' auto), which the window's width does not count yet.
function M.width(buf)
  local w
  for _, win in ipairs(api.nvim_list_wins()) do
    if api.nvim_win_get_buf(win) == buf then
      local info = fn.getwininfo(win)[1]
      local ww = info and (info.width - (info.textoff or 0) - 2)
      if ww and (not w or ww < w) then w = ww end
    end
  end
  return math.max(w or (vim.o.columns - 4), MIN)
end

-- prefix is the longest start of s at most w display cells wide.
local function prefix(s, w)
  local out, n = '', fn.strchars(s)
  for i = 0, n - 1 do
    local c = fn.strcharpart(s, i, 1)
    if dw(out .. c) > w then break end
    out = out .. c
  end
  return out
end

-- clip cuts s to w display cells, ending in … when cut.
function M.clip(s, w)
  if dw(s) <= w then return s end
  return prefix(s, w - 1) .. '…'
end

-- lines wraps s at spaces into at most n lines of w cells; a word longer
-- than a line is cut across lines, and what is left over after n lines
-- is marked with … on the last.
function M.lines(s, w, n)
  local out, cur = {}, nil
  local function push(l)
    out[#out + 1] = l
  end
  for word in s:gmatch('%S+') do
    local try = cur and (cur .. ' ' .. word) or word
    if dw(try) <= w then
      cur = try
    else
      if cur then push(cur) end
      cur = word
      while dw(cur) > w and #out <= n do
        local head = prefix(cur, w)
        push(head)
        cur = cur:sub(#head + 1)
      end
    end
    if #out > n then break end
  end
  if cur and cur ~= '' then push(cur) end
  if #out > n then
    local last = out[n]
    for i = #out, n, -1 do out[i] = nil end
    out[n] = M.clip(last .. ' …', w)
  end
  return out
end

return M
