-- :DeepResearchRun 2 over a research whose root delegates two subproblems: every researcher
-- runs, two at once, each writing into its own document. approvalMode 'create': each
-- researcher's message above it waits in its own document; the scenario opens each one the
-- notification names and approves it with :DeepResearchExecute, until the research finishes.
local H = dofile(vim.env.DR_HARNESS)
H.run(function()
  H.setup({ settings = { deepResearch = {
    approvalMode = 'create', baseUrl = assert(vim.env.DR_MODEL_URL), model = 'scripted-model',
  } } })
  local said = {}
  local notify = vim.notify
  vim.notify = function(msg, level, opts)
    table.insert(said, msg)
    return notify(msg, level, opts)
  end
  local offers = {}
  vim.ui.select = function(items, _, on_choice) -- the offer of the final report at the end: not now
    table.insert(offers, items)
    on_choice(nil)
  end
  local main_buf = H.open()
  local dr = require('deep_research')
  local uri = vim.uri_from_bufnr(main_buf)
  local most, approved, statuslines = 0, {}, {}
  local function state()
    local s = dr.autopilot[uri]
    if s then
      most = math.max(most, s.researchers or 0)
    end
    return s
  end
  vim.cmd('DeepResearchRun 2')
  H.wait(function() return state() ~= nil end, 'the autopilot to start')
  for _ = 1, 6 do
    H.wait(function()
      local s = state()
      return s.state ~= 'running'
    end, 'the autopilot to pause or end', 60000)
    local s = state()
    if s.state ~= 'waiting-approval' then
      break
    end
    table.insert(statuslines, dr.statusline())
    for _, item in ipairs(s.waiting) do
      table.insert(approved, item.researcher)
      local buf = H.open(vim.uri_to_fname(item.uri))
      H.wait(function() return vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1] ~= '' end, 'the waiting message')
      local result = dr.execute(buf)
      assert(result and result.executed, 'the approved message did not run: ' .. vim.inspect(result))
      assert(result.researcher == item.researcher, 'it ran as ' .. tostring(result.researcher))
    end
    H.wait(function() return state().state ~= 'waiting-approval' end, 'the run to go on')
  end
  H.record('final', state())
  H.record('approved', approved)
  H.record('most_researchers', most)
  H.record('statuslines', statuslines)
  H.record('said', said)
  H.record('offers', #offers)
  H.record('main_lines', vim.api.nvim_buf_get_lines(main_buf, 0, -1, false))
end)
