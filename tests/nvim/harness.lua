-- Shared helpers for the headless Neovim scenarios (tests/nvim/test_neovim.py).
--
-- Every scenario runs in `nvim --headless -u NONE -i NONE -n` and sets up Neovim the
-- way a user does (README): the runtime folder on 'runtimepath', then
-- vim.lsp.enable('deep_research'). Observations go to a JSON file ($DR_OUT) that
-- pytest asserts on; the process prints PASS or FAIL on stderr and exits 0 or 1.
-- Nothing sleeps: waits are vim.wait() on a condition, or timer steps with a deadline.
local H = {}

H.env = {
  runtime = assert(vim.env.DR_RUNTIME, 'DR_RUNTIME: the editors/nvim folder'),
  file = assert(vim.env.DR_FILE, 'DR_FILE: the .dr document to edit'),
  out = assert(vim.env.DR_OUT, 'DR_OUT: where to write the observations'),
  server_cmd = vim.env.DR_SERVER_CMD, -- JSON list; only when `deep-research` is not on PATH
}
H.WAIT = tonumber(vim.env.DR_WAIT_MS or "") or 10000
H.observed = {}
H.executions = {} -- deepResearch/didExecute notifications, in order

--- Record an observation for pytest.
function H.record(key, value)
  H.observed[key] = value
end

--- Wait for cond() to be true, or fail with `what`.
function H.wait(cond, what, ms)
  if not vim.wait(ms or H.WAIT, cond, 10) then
    error('timed out waiting for ' .. what, 2)
  end
end

--- The user's setup (docs/editors.md), plus what `-u NONE` turns off.
--- @param config table? given to vim.lsp.config('deep_research', …), as a user would
function H.setup(config)
  vim.opt.runtimepath:append(H.env.runtime)
  vim.cmd('filetype plugin on') -- -u NONE leaves detection off; this also sources ftdetect/
  vim.cmd.runtime('plugin/deep_research.lua') -- -u NONE loads no plugin/ (the lazy.nvim spec sources it too)
  vim.o.shortmess = vim.o.shortmess .. 'F'
  vim.o.report = 9999
  if H.env.server_cmd then
    vim.lsp.config('deep_research', { cmd = vim.json.decode(H.env.server_cmd) })
  end
  if config then
    vim.lsp.config('deep_research', config)
  end
  vim.lsp.handlers['deepResearch/didExecute'] = function(_, params)
    table.insert(H.executions, params)
  end
  vim.lsp.enable('deep_research')
end

--- Open the document and wait until the server is attached and initialised.
--- @return integer bufnr, vim.lsp.Client client
function H.open(path)
  vim.cmd.edit(vim.fn.fnameescape(path or H.env.file))
  local buf = vim.api.nvim_get_current_buf()
  local client
  H.wait(function()
    client = vim.lsp.get_clients({ bufnr = buf, name = 'deep_research' })[1]
    return client ~= nil and client.initialized == true
  end, 'the deep_research client to attach')
  return buf, client
end

--- Diagnostics of the buffer as plain tables (0-based, LSP-like, columns in bytes).
function H.diagnostics(buf)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    table.insert(out, {
      message = d.message,
      code = d.code,
      severity = d.severity,
      range = { d.lnum, d.col, d.end_lnum, d.end_col },
    })
  end
  return out
end

--- Completion labels at (row, character) through the client, as an editor in insert
--- mode asks (the cursor after the last typed character). ASCII lines only.
function H.complete(buf, client, row, col)
  local params = { textDocument = { uri = vim.uri_from_bufnr(buf) }, position = { line = row, character = col } }
  local response = client:request_sync('textDocument/completion', params, H.WAIT, buf)
  assert(response and not response.err, 'completion failed: ' .. vim.inspect(response))
  local result = response.result or {}
  local items = result.items or result
  -- As Neovim's completion does: what every item shares (range, format) comes once, in itemDefaults.
  local defaults = result.itemDefaults or {}
  local labels = {}
  for _, item in ipairs(items) do
    if defaults.editRange and not item.textEdit then
      item.textEdit = { range = defaults.editRange, newText = item.textEditText or item.label }
    end
    item.insertTextFormat = item.insertTextFormat or defaults.insertTextFormat
    table.insert(labels, item.label)
  end
  return labels, items
end

--- Stop the clients (the server processes exit too), write the observations, quit.
function H.finish(ok, err)
  H.record('executions', H.executions)
  local file = io.open(H.env.out, 'w')
  if file then
    file:write(vim.json.encode(H.observed))
    file:close()
  end
  io.stderr:write(ok and '\nPASS\n' or ('\nFAIL: ' .. tostring(err) .. '\n'))
  for _, client in ipairs(vim.lsp.get_clients()) do
    client:stop()
  end
  vim.wait(3000, function()
    return #vim.lsp.get_clients() == 0
  end, 10)
  vim.cmd(ok and 'qall!' or 'cquit! 1')
end

--- Run main() under -l: any error is a FAIL with its traceback.
function H.run(main)
  local ok, err = xpcall(main, debug.traceback)
  H.finish(ok, err)
end

--- Run a list of steps from a timer, for scenarios that need the main loop to run
--- between steps (typed keys are only processed there). A step returns true when it
--- is done; it is called again every 10 ms until then, up to H.WAIT ms per step.
function H.run_steps(steps)
  local index, deadline = 1, vim.uv.now() + H.WAIT
  local timer = assert(vim.uv.new_timer())
  local function stop(ok, err)
    timer:stop()
    timer:close()
    H.finish(ok, err)
  end
  timer:start(0, 10, vim.schedule_wrap(function()
    if timer:is_closing() then
      return
    end
    local ok, done = xpcall(steps[index].run, debug.traceback)
    if not ok then
      return stop(false, done)
    end
    if done then
      index, deadline = index + 1, vim.uv.now() + H.WAIT
      if index > #steps then
        return stop(true)
      end
    elseif vim.uv.now() > deadline then
      return stop(false, 'timed out in step: ' .. steps[index].name)
    end
  end))
end

return H
