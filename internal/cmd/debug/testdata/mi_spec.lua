-- Checks for containers/files/nvim/lua/stem/mi.lua, run by TestLuaMI in a
-- headless Neovim. Each failure is one line on stderr; the exit status is
-- the number of failures.
local mi = require('stem.mi')
local failures = 0
local function check(name, ok, detail)
  if not ok then
    failures = failures + 1
    io.stderr:write('FAIL ' .. name .. ': ' .. vim.inspect(detail) .. '\n')
  end
end

-- A real stop of gdb-multiarch in an assembly file.
local r = mi.parse([[*stopped,reason="breakpoint-hit",disp="keep",bkptno="1",frame={addr="0x80000414",func="asm_count",args=[],file="counter.S",fullname="/w/inf/bss/t4/counter.S",line="35",arch="riscv:rv32"},thread-id="1",stopped-threads="all"]])
check('stopped', r and r.kind == 'exec' and r.class == 'stopped' and r.results.frame.line == '35'
  and r.results.frame.fullname == '/w/inf/bss/t4/counter.S' and #r.results.frame.args == 0, r)

-- A stop without source: no file, no line.
r = mi.parse([[*stopped,frame={addr="0x00001000",func="??",args=[],arch="riscv:rv32"},thread-id="1",stopped-threads="all"]])
check('no source', r and r.results.frame.fullname == nil and r.results.frame.func == '??', r)

-- A token, a list of results, a multi-location breakpoint (MI3).
r = mi.parse([[12^done,BreakpointTable={nr_rows="2",hdr=[{width="7"},{width="14"}],body=[bkpt={number="1",line="3"},bkpt={number="2",locations=[{number="2.1",line="4"},{number="2.2",line="9"}]}]}]])
local body = r and r.results.BreakpointTable.body
check('table', r and r.token == '12' and r.class == 'done' and #body == 2 and body[2].locations[2].line == '9'
  and #r.results.BreakpointTable.hdr == 2, r)

-- Escapes in c-strings: quotes, backslashes, octal UTF-8, \n and \t.
r = mi.parse([[=breakpoint-created,bkpt={number="3",fullname="/a b/\"q\"\\x\303\251.c",line="1"}]])
check('escapes', r and r.results.bkpt.fullname == '/a b/"q"\\xé.c', r)
r = mi.parse([[7~"zero  0x0\t0\n"]])
check('console with token', r and r.kind == 'console' and r.token == '7' and r.text == 'zero  0x0\t0\n', r)

-- Records without results, the prompt, and lines that are not MI.
check('running', (mi.parse('^running') or {}).class == 'running')
check('prompt', (mi.parse('(gdb) ') or {}).kind == 'prompt')
for _, bad in ipairs({ '^done,x=', 'hello', '*stopped,frame={a="1"', '~"unterminated', '^done,x="1"junk', '=a,b' }) do
  local v, err = mi.parse(bad)
  check('refuses ' .. bad, v == nil and type(err) == 'string', v)
end

-- quote gives back what parse reads, for any bytes.
for _, s in ipairs({ '/plain/path.c', '/a b/"q"\\x\n\t\1\127é', '' }) do
  local got = mi.parse('^done,v=' .. mi.quote(s))
  check('quote ' .. vim.inspect(s), got and got.results.v == s, got)
end

vim.cmd('cquit ' .. failures)
