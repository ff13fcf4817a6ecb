-- A user's keystrokes: type `///` in insert mode, ask for omni-completion (<C-x><C-o>,
-- which Neovim 0.11 wires to the language server on attach), see the menu, pick a block
-- command with <C-n> and accept it with <C-y>: the block snippet is expanded.
-- Typed keys are processed by the main loop only, so this runs as timer steps under -S.
local ok_setup, H = pcall(dofile, vim.env.DR_HARNESS)
if not ok_setup then
  io.stderr:write('\nFAIL: ' .. tostring(H) .. '\n')
  vim.cmd('cquit! 1')
end

local buf
local ok, err = xpcall(function()
  H.setup()
  vim.cmd.edit(vim.fn.fnameescape(H.env.file))
  buf = vim.api.nvim_get_current_buf()
end, debug.traceback)
if not ok then
  H.finish(false, err)
end

H.run_steps({
  { name = 'attach and omnifunc', run = function()
    local client = vim.lsp.get_clients({ bufnr = buf, name = 'deep_research' })[1]
    return client ~= nil and client.initialized and vim.bo[buf].omnifunc ~= ''
  end },
  { name = 'type ///, then <C-x><C-o>', run = function()
    vim.api.nvim_feedkeys(vim.keycode('i///<C-x><C-o>'), 'nt', false)
    return true
  end },
  { name = 'the completion menu', run = function()
    local info = vim.fn.complete_info({ 'items', 'pum_visible', 'mode' })
    if info.pum_visible ~= 1 or #info.items == 0 then
      return false
    end
    local words = {}
    for _, item in ipairs(info.items) do
      table.insert(words, { word = item.word, abbr = item.abbr, kind = item.kind })
    end
    H.record('menu', { mode = info.mode, pum_visible = info.pum_visible, items = words })
    H.record('typed', vim.api.nvim_get_current_line())
    return true
  end },
  { name = 'choose add_subproblem and accept it', run = function()
    -- The first item is selected; move down to the block command, then <C-y>.
    local index
    for i, item in ipairs(H.observed.menu.items) do
      if item.abbr == 'add_subproblem' then
        index = i
      end
    end
    assert(index, 'add_subproblem is not in the menu')
    vim.api.nvim_feedkeys(vim.keycode(('<C-n>'):rep(index - 1) .. '<C-y>'), 'nt', false)
    return true
  end },
  { name = 'the block inserted, its first placeholder selected', run = function()
    local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
    local mode = vim.api.nvim_get_mode().mode
    H.record('accepted', lines)
    H.record('mode', mode)
    -- vim.snippet inserts the text, then selects the placeholder with typed keys: a tick
    -- of this timer can fall between the two on a loaded machine.
    if not vim.tbl_contains(lines, '>>>') or mode ~= 's' then
      return false
    end
    H.record('selected', vim.fn.getregion(vim.fn.getpos('v'), vim.fn.getpos('.'), { type = 'v' }))
    vim.api.nvim_feedkeys(vim.keycode('<Esc>'), 'nt', false)
    return true
  end },
})
