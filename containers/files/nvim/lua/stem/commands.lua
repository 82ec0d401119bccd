-- stem.commands: the editor's debugger commands and keys. Each sends MI
-- commands to the layout's gdb through the bridge (stem.debug), so the
-- gdb pane, agents and gdb-sync.json see the result like any other change.
--
--   :StemBreak      toggle a breakpoint on the cursor's line      <F9>
--   :StemUntil      run to the cursor's line                      <F8>
--   :StemContinue   continue (or start a program not yet running) <F5>
--   :StemNext       next line, over calls                         <F10>
--   :StemStep       next line, into calls                         <F11>
--   :StemFinish     run until the function returns                <S-F11> <F12>
--   :StemStepi      one instruction, into calls
--   :StemNexti      one instruction, over calls
--   :StemInterrupt  stop the running program
--   :StemFrame      show the selected frame now
--   :StemRegisters  open or close the registers view              <F6>
--   :StemMemory [expr]  the words of memory the view shows ($sp)
--
-- Keys are mapped only where the student has no mapping of their own, and
-- not at all with `let g:stem_debug_keys = 0` in their init.vim.
local api = vim.api
local mi = require('stem.mi')
local view = require('stem.view')
local M = {}

local function here()
  local file = api.nvim_buf_get_name(0)
  if file == '' or vim.bo.buftype ~= '' then
    vim.notify('stem: the cursor is not in a file', vim.log.levels.WARN)
    return nil
  end
  return file, api.nvim_win_get_cursor(0)[1]
end

local function where(file, line)
  return '--source ' .. mi.quote(file) .. ' --line ' .. line
end

function M.setup(dbg)
  local S = dbg.state

  local function resume(cmd)
    return function()
      if cmd == '-exec-continue' and (S.state == 'not-started' or S.state == 'exited') then
        cmd = '-exec-run'
      end
      dbg.send(cmd)
    end
  end

  local function toggle()
    local file, line = here()
    if not file then return end
    local name, nums = view.canon(file), {}
    for n, b in pairs(S.bkpts) do
      for _, l in ipairs(b.locs) do
        if l.line == line and view.canon(l.file) == name then nums[#nums + 1] = n end
      end
    end
    if #nums > 0 then
      dbg.send('-break-delete ' .. table.concat(nums, ' '), function(rec)
        if rec.class == 'error' then
          vim.notify('stem: ' .. (rec.results.msg or 'gdb refused'), vim.log.levels.ERROR)
          return
        end
        for _, n in ipairs(nums) do S.bkpts[n] = nil end
        view.refresh_all()
      end)
    else
      dbg.send('-break-insert ' .. where(file, line), function(rec)
        if rec.class == 'error' then
          vim.notify('stem: ' .. (rec.results.msg or 'gdb refused'), vim.log.levels.ERROR)
          return
        end
        dbg.add_bkpt(rec.results.bkpt)
        view.refresh_all()
      end)
    end
  end

  local function until_cursor()
    local file, line = here()
    if not file then return end
    dbg.send('-break-insert -t ' .. where(file, line), function(rec)
      if rec.class == 'error' then
        vim.notify('stem: ' .. (rec.results.msg or 'gdb refused'), vim.log.levels.ERROR)
        return
      end
      dbg.add_bkpt(rec.results.bkpt)
      view.refresh_all()
      resume('-exec-continue')()
    end)
  end

  local cmds = {
    StemBreak = { toggle, 'F9' },
    StemUntil = { until_cursor, 'F8' },
    StemContinue = { resume('-exec-continue'), 'F5' },
    StemNext = { resume('-exec-next'), 'F10' },
    StemStep = { resume('-exec-step'), 'F11' },
    StemFinish = { resume('-exec-finish'), 'S-F11', 'F12' },
    StemStepi = { resume('-exec-step-instruction') },
    StemNexti = { resume('-exec-next-instruction') },
    StemInterrupt = { resume('-exec-interrupt') },
    StemFrame = { function()
      if not view.goto_frame() then vim.notify('stem: ' .. (vim.g.stem_debug_status ~= '' and vim.g.stem_debug_status or 'no frame to show')) end
    end },
    StemRegisters = { function() require('stem.regs').toggle(dbg) end, 'F6' },
  }
  api.nvim_create_user_command('StemMemory', function(a) require('stem.regs').memory(dbg, a.args) end,
    { nargs = '?', desc = 'stem debugger: memory in the registers view' })
  for name, c in pairs(cmds) do
    api.nvim_create_user_command(name, function() c[1]() end, { desc = 'stem debugger' })
    if vim.g.stem_debug_keys ~= 0 then
      for i = 2, #c do
        local lhs = '<' .. c[i] .. '>'
        if vim.fn.maparg(lhs, 'n') == '' then
          vim.keymap.set('n', lhs, '<Cmd>' .. name .. '<CR>', { desc = name })
        end
      end
    end
  end
end

return M
