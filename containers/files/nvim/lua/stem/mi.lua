-- stem.mi: GDB/MI records for the student's editor (see stem.debug).
--
-- parse(line) reads one line of the gdb bridge's output into
--   { token = "12" or nil, kind = "result" | "exec" | "status" | "notify"
--     | "console" | "target" | "log" | "prompt", class = "done" | "stopped"
--     | ..., results = { name = value, ... }, text = "..." }
-- where a value is a string, a table of named fields (a tuple), or an array
-- (a list of values, or the values of a list of results such as
-- body=[bkpt={...},bkpt={...}]). The bridge puts a
-- command's token on the stream records that command produced, which parse
-- accepts. It returns nil and a message for a line it cannot read.
--
-- quote(s) writes s as an MI c-string for a command argument.
local M = {}

local kinds = {
  ['^'] = 'result', ['*'] = 'exec', ['+'] = 'status', ['='] = 'notify',
  ['~'] = 'console', ['@'] = 'target', ['&'] = 'log',
}

local escapes = { n = '\n', t = '\t', r = '\r', a = '\a', b = '\b', f = '\f', v = '\v', e = '\27',
  ['"'] = '"', ['\\'] = '\\', ["'"] = "'" }

-- cstring reads the c-string starting at s[i] == '"'; it returns the text
-- and the index after the closing quote.
local function cstring(s, i)
  local out, j = {}, i + 1
  while true do
    local k = s:find('["\\]', j)
    if not k then return nil, 'unterminated string' end
    out[#out + 1] = s:sub(j, k - 1)
    if s:sub(k, k) == '"' then return table.concat(out), k + 1 end
    local c = s:sub(k + 1, k + 1)
    local oct = s:match('^[0-7][0-7]?[0-7]?', k + 1)
    if oct then
      out[#out + 1] = string.char(tonumber(oct, 8) % 256)
      j = k + 1 + #oct
    elseif c == 'x' and s:match('^%x%x', k + 2) then
      out[#out + 1] = string.char(tonumber(s:sub(k + 2, k + 3), 16))
      j = k + 4
    else
      out[#out + 1] = escapes[c] or c
      j = k + 2
    end
  end
end

local value

-- results reads name=value pairs up to the closing character stop (or the
-- end of the line when stop is nil).
local function results(s, i, stop)
  local named, list = {}, {}
  if stop and s:sub(i, i) == stop then return named, list, i + 1 end
  while true do
    local name = s:match('^[%w_%-]+', i)
    if not name or s:sub(i + #name, i + #name) ~= '=' then return nil, 'expected name=value at ' .. i end
    local v, j = value(s, i + #name + 1)
    if v == nil then return nil, j end
    if named[name] == nil then named[name] = v end
    list[#list + 1] = { name, v }
    local c = s:sub(j, j)
    if c == ',' then
      i = j + 1
    elseif (stop and c == stop) or (not stop and j > #s) then
      return named, list, j + 1
    else
      return nil, 'unexpected ' .. (c == '' and 'end of line' or c) .. ' at ' .. j
    end
  end
end

value = function(s, i)
  local c = s:sub(i, i)
  if c == '"' then return cstring(s, i) end
  if c == '{' then
    local named, list, j = results(s, i + 1, '}')
    if not named then return nil, list end
    return named, j
  end
  if c == '[' then
    if s:sub(i + 1, i + 1) == ']' then return {}, i + 2 end
    if s:sub(i + 1, i + 1):match('[%w_]') and s:match('^[%w_%-]+=', i + 1) then
      local named, list, j = results(s, i + 1, ']')
      if not named then return nil, list end
      local arr = {}
      for k, f in ipairs(list) do arr[k] = f[2] end
      return arr, j
    end
    local arr, j = {}, i + 1
    while true do
      local v, k = value(s, j)
      if v == nil then return nil, k end
      arr[#arr + 1] = v
      local d = s:sub(k, k)
      if d == ']' then return arr, k + 1 end
      if d ~= ',' then return nil, 'unexpected ' .. d .. ' in list at ' .. k end
      j = k + 1
    end
  end
  return nil, 'unexpected ' .. (c == '' and 'end of line' or c) .. ' at ' .. i
end

function M.parse(line)
  line = line:gsub('\r$', '')
  if line:match('^%(gdb%) *$') then return { kind = 'prompt' } end
  local token, i = line:match('^(%d*)()')
  if token == '' then token = nil end
  local kind = kinds[line:sub(i, i)]
  if not kind then return nil, 'not an MI record' end
  local rec = { token = token, kind = kind, results = {} }
  if kind == 'console' or kind == 'target' or kind == 'log' then
    local text, err = cstring(line, i + 1)
    if not text then return nil, err end
    rec.text = text
    return rec
  end
  local class, j = line:match('^([%w_%-]+)()', i + 1)
  if not class then return nil, 'no class' end
  rec.class = class
  if j <= #line then
    if line:sub(j, j) ~= ',' then return nil, 'unexpected text after the class' end
    local named, err = results(line, j + 1, nil)
    if not named then return nil, err end
    rec.results = named
  end
  return rec
end

function M.quote(s)
  return '"' .. s:gsub('[%c"\\\127]', function(c)
    if c == '"' or c == '\\' then return '\\' .. c end
    if c == '\n' then return '\\n' end
    if c == '\t' then return '\\t' end
    return string.format('\\%03o', c:byte())
  end) .. '"'
end

return M
