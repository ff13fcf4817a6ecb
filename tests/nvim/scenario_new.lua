-- :DeepResearchNew asks for the folder, the instruction, context and attachments with
-- vim.ui.input / vim.ui.select (scripted here, as a plugin like dressing.nvim would answer),
-- makes the research through the server and opens its message beside the prompt;
-- :DeepResearchContinue gives it a new instruction. A file outside the workspace is refused
-- with the server's sentence. $DR_PAGE_URL: a page on loopback; $DR_NOTES: a file in the
-- current directory; $DR_OUTSIDE: a file outside it; $DR_FOLDER: a folder of sources in it.
local H = dofile(vim.env.DR_HARNESS)
H.run(function()
  H.setup({ settings = { deepResearch = { fetch = { allowPrivateNetworks = true } } } })
  local asked, answers = {}, {}
  vim.ui.input = function(opts, on_confirm)
    table.insert(asked, opts.prompt)
    on_confirm(table.remove(answers, 1))
  end
  vim.ui.select = function(items, opts, on_choice)
    table.insert(asked, opts.prompt .. ' ' .. table.concat(items, ' | '))
    local want = table.remove(answers, 1)
    for index, item in ipairs(items) do
      if item == want then return on_choice(item, index) end
    end
    on_choice(nil, nil)
  end
  local notes = {}
  vim.notify = function(msg, level) table.insert(notes, { msg, level }) end
  local function run(command, script)
    answers = script
    local done, result, failure = false, nil, nil
    local module = require('deep_research')
    if command == 'new' then
      module.new_research(nil, function(r, e) done, result, failure = true, r, e end)
    else
      module.continue_research(function(r, e) done, result, failure = true, r, e end)
    end
    H.wait(function() return done end, 'the server to answer ' .. command)
    return result, failure
  end

  local folder = vim.fn.getcwd() .. '/gpu study'
  -- A file outside the workspace (the current directory and the new folder): refused, nothing made.
  local _, refused = run('new', { folder, 'Tiles', 'Add a context file', vim.env.DR_OUTSIDE, 'Continue',
    'Create the research' })
  H.record('refused', refused)
  H.record('made_after_refusal', vim.uv.fs_stat(folder) ~= nil)
  H.record('asked_first', asked)

  asked = {}
  -- Now as a user types it, the folder given: `:DeepResearchNew gpu\ study`.
  answers = {
    'Which tile size makes matmul clearest?',
    'Type context text', 'The course uses C.', 'Add a context file', vim.env.DR_NOTES, 'Continue',
    'Attach a file or folder', vim.env.DR_FOLDER, 'Attach a web page (URL)', vim.env.DR_PAGE_URL,
    'Create the research',
  }
  vim.cmd('DeepResearchNew gpu\\ study')
  H.wait(function() return vim.api.nvim_buf_get_name(0) == folder .. '/message.dr' end, 'the new message document')
  H.record('asked', asked)
  H.record('current', vim.api.nvim_buf_get_name(0))
  local windows = {}
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    table.insert(windows, vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win)))
  end
  H.record('windows', windows)
  local buf = vim.api.nvim_get_current_buf()
  H.wait(function()
    local client = vim.lsp.get_clients({ bufnr = buf, name = 'deep_research' })[1]
    return client ~= nil and client.initialized
  end, 'the client on the new message document')
  H.record('clients', #vim.lsp.get_clients({ name = 'deep_research' }))

  asked = {}
  local continued = run('continue', { 'Now compare 32x32 tiles too.' })
  H.record('continued', continued)
  H.record('asked_continue', asked)
  H.record('notes', notes)
end)
