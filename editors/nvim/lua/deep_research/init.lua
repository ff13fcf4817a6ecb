-- Deep Research for Neovim 0.11: start a research (:DeepResearchNew, :DeepResearchContinue),
-- execute a message on write, show the prompt, run the autopilot (:DeepResearchRun /
-- :DeepResearchStop, M.statusline() for 'statusline'), list the researchers of a research
-- that delegates and open one's message document (:DeepResearchResearchers).
--
-- Everything here goes through the language server's public protocol
-- (docs/protocol.md): the code action of kind `source.deepResearch.execute` on write,
-- the workspace commands `deepResearch.execute`, `deepResearch.showPrompt`,
-- `deepResearch.showReport`, `deepResearch.undo`, `deepResearch.export`, `deepResearch.compile`,
-- `deepResearch.newResearch`,
-- `deepResearch.continueResearch`, `deepResearch.run` / `stop` and `deepResearch.researchers`.
-- A delegated researcher's message document (`message.dr` in its problem's folder) is a
-- buffer like main's: everything here works on it, as that researcher.
-- The server clears the executed message with workspace/applyEdit and opens the
-- prompt with window/showDocument; Neovim handles both itself.
--
-- Options (set before opening a .dr file):
--   vim.g.deep_research_execute_on_write = false   -- do not execute on :write
--   vim.g.deep_research_timeout = 10000            -- ms to wait for an execution or an undo
--   vim.g.deep_research_open_dossier = false       -- :DeepResearchExport writes, does not open
--   vim.g.deep_research_open_report = false        -- :DeepResearchCompile writes, does not open
--   vim.g.deep_research_completion = false         -- leave vim.lsp.completion alone
--   vim.g.deep_research_autotrigger = true         -- complete as you type `///`, `<<< `
--   vim.g.deep_research_offer_report = false       -- when the autopilot finishes, do not ask
--                                                     (vim.ui.select) whether to open the answer
local M = {}

M.EXECUTE_KIND = 'source.deepResearch.execute'
M.APPROVE_KIND = 'source.deepResearch.approveAndExecute'

local function timeout()
  return vim.g.deep_research_timeout or 10000
end

local function notify(msg, level)
  vim.notify('Deep Research: ' .. msg, level or vim.log.levels.INFO)
end

--- The language client serving this buffer: the one that offers our commands,
--- whatever name it was configured under.
--- @param bufnr integer
--- @return vim.lsp.Client?
function M.client(bufnr)
  for _, client in ipairs(vim.lsp.get_clients({ bufnr = bufnr })) do
    local provider = client.server_capabilities and client.server_capabilities.executeCommandProvider
    local commands = type(provider) == 'table' and provider.commands or {}
    if vim.list_contains(commands, 'deepResearch.execute') then
      return client
    end
  end
  return nil
end

--- The buffer's client, or nil with a warning to the user (for the user's commands).
--- @param bufnr integer
local function attached_client(bufnr)
  local client = M.client(bufnr)
  if not client then
    notify('no Deep Research language server for this buffer', vim.log.levels.WARN)
  end
  return client
end

--- Write the buffer without executing it again (the cleared message is persisted).
--- @param bufnr integer
local function write_consumed(bufnr)
  if not vim.api.nvim_buf_is_loaded(bufnr) or not vim.bo[bufnr].modified then
    return
  end
  vim.b[bufnr].deep_research_writing = true
  local ok, err = pcall(vim.api.nvim_buf_call, bufnr, function()
    vim.cmd('silent keepalt write')
  end)
  vim.b[bufnr].deep_research_writing = false
  if not ok then
    notify('could not save the cleared message: ' .. tostring(err), vim.log.levels.ERROR)
  end
end

--- Run a server command for the buffer and wait for its result (applyEdit and
--- showDocument from the server are handled while waiting).
--- @return table? result, string? error
local function run_command(client, bufnr, command)
  local done, result, failure = false, nil, nil
  client:exec_cmd(command, { bufnr = bufnr }, function(err, res)
    done, result, failure = true, res, err and (err.message or vim.inspect(err)) or nil
  end)
  if not vim.wait(timeout(), function() return done end, 10) then
    return nil, 'no answer from the language server within ' .. timeout() .. ' ms'
  end
  return result, failure
end

--- After an execution: say what happened, and save the buffer the server cleared.
local function after_execution(bufnr, result)
  if type(result) ~= 'table' then
    return
  end
  if result.executed then
    write_consumed(bufnr)
    local msg = ('message executed: %d done, %d failed, %d skipped'):format(
      result.ok or 0, result.failed or 0, result.skipped or 0)
    notify(msg, (result.failed or 0) > 0 and vim.log.levels.WARN or vim.log.levels.INFO)
  elseif result.reason == 'not-a-research' and result.message then
    notify(result.message, vim.log.levels.WARN)
  end
  -- "needs-approval": the server has already said so (window/showMessage).
  -- "empty", "already-executed": nothing to do, nothing to say.
end

--- Ask the server for the code action of `kind` on the whole buffer and run it.
--- @param bufnr integer
--- @param kind string
--- @param trigger integer CodeActionTriggerKind: 1 invoked, 2 automatic
--- @return table? result the server's ExecutionResult, nil when nothing ran
function M.code_action(bufnr, kind, trigger)
  local client = M.client(bufnr)
  if not client then
    return nil
  end
  local last = vim.api.nvim_buf_line_count(bufnr) - 1
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    range = vim.lsp.util.make_given_range_params({ 1, 0 }, { last + 1, 0 }, bufnr, client.offset_encoding).range,
    context = { diagnostics = {}, only = { kind }, triggerKind = trigger },
  }
  local response, err = client:request_sync('textDocument/codeAction', params, timeout(), bufnr)
  if not response or response.err then
    notify('code action failed: ' .. tostring(err or (response and response.err.message)), vim.log.levels.ERROR)
    return nil
  end
  for _, action in ipairs(response.result or {}) do
    if action.kind == kind then
      if action.edit then
        vim.lsp.util.apply_workspace_edit(action.edit, client.offset_encoding)
      end
      local command = type(action.command) == 'table' and action.command or nil
      if command then
        local result, failure = run_command(client, bufnr, command)
        if failure then
          notify(failure, vim.log.levels.ERROR)
          return nil
        end
        after_execution(bufnr, result)
        return result
      end
      return nil
    end
  end
  return nil -- no such action: an empty or already executed message
end

--- BufWritePost: execute the message through the code action, as VS Code does on save.
--- @param bufnr integer
function M.on_write(bufnr)
  if vim.b[bufnr].deep_research_writing then
    return -- our own save of the cleared buffer
  end
  if vim.g.deep_research_execute_on_write == false or vim.b[bufnr].deep_research_execute_on_write == false then
    return
  end
  if not M.client(bufnr) then
    return
  end
  return M.code_action(bufnr, M.EXECUTE_KIND, 2)
end

--- :DeepResearchExecute: execute the message now, approving every command.
--- @param bufnr integer
function M.execute(bufnr)
  local client = attached_client(bufnr)
  if not client then
    return nil
  end
  local uri = vim.uri_from_bufnr(bufnr)
  local result, failure = run_command(client, bufnr, {
    title = 'Deep Research: execute', command = 'deepResearch.execute', arguments = { uri },
  })
  if failure then
    notify(failure, vim.log.levels.ERROR)
    return nil
  end
  after_execution(bufnr, result)
  if type(result) == 'table' and not result.executed and result.reason == 'empty' then
    notify('the message is empty: nothing to execute')
  end
  return result
end

--- :DeepResearchPrompt: open the prompt the assistant sees next (window/showDocument).
--- @param bufnr integer
function M.show_prompt(bufnr)
  local client = attached_client(bufnr)
  if not client then
    return
  end
  local command = {
    title = 'Deep Research: show prompt',
    command = 'deepResearch.showPrompt',
    arguments = { vim.uri_from_bufnr(bufnr) },
  }
  client:exec_cmd(command, { bufnr = bufnr }, function(err)
    if err then
      notify('cannot show the prompt: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    end
  end)
end

--- :DeepResearchReport [problem]: open a problem's report, by default the root's: the
--- research's answer (deepResearch.showReport; the server opens it with window/showDocument,
--- or says that there is none yet). `problem` is its titles below the root joined by " / ".
--- @param bufnr integer
--- @param problem string?
--- @param on_done fun(result: table?)? called with the server's ShowReportResult
function M.show_report(bufnr, problem, on_done)
  local client = attached_client(bufnr)
  if not client then
    return
  end
  local arguments = { vim.uri_from_bufnr(bufnr) }
  if problem and problem ~= '' then
    table.insert(arguments, problem)
  end
  local command = { title = 'Deep Research: show report', command = 'deepResearch.showReport', arguments = arguments }
  client:exec_cmd(command, { bufnr = bufnr }, function(err, result)
    if err then
      notify('cannot show the report: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    end
    if on_done then
      on_done(not err and result or nil)
    end
  end)
end

--- :DeepResearchUndo: take back the last executed message (deepResearch.undo). The
--- server puts the message back into this buffer if it is empty (the buffer is left
--- unsaved: edit the message and :write to run it again); a refusal (a file edited by
--- hand since, nothing left to undo) comes from the server as a message.
--- @param bufnr integer
--- @return table? result the server's UndoResult
function M.undo(bufnr)
  local client = attached_client(bufnr)
  if not client then
    return nil
  end
  local result, failure = run_command(client, bufnr, {
    title = 'Deep Research: undo', command = 'deepResearch.undo', arguments = { vim.uri_from_bufnr(bufnr) },
  })
  if failure then
    notify(failure, vim.log.levels.ERROR)
    return nil
  end
  if type(result) == 'table' and result.undone then
    notify(('message %d undone%s'):format(result.message, result.putBack and '; it is back in the buffer' or ''))
  end
  return result
end

--- :DeepResearchExport: write the research as one HTML file (deepResearch.export, into
--- the research folder) and open it with vim.ui.open, unless
--- vim.g.deep_research_open_dossier is false. Asynchronous: a large research takes a while.
--- @param bufnr integer
--- @param on_done fun(result: table?, err: string?)? called when the dossier is written
function M.export(bufnr, on_done)
  local client = attached_client(bufnr)
  if not client then
    return
  end
  local command = {
    title = 'Deep Research: export', command = 'deepResearch.export', arguments = { vim.uri_from_bufnr(bufnr) },
  }
  client:exec_cmd(command, { bufnr = bufnr }, function(err, result)
    if err or type(result) ~= 'table' then
      local message = err and (err.message or vim.inspect(err)) or 'no answer'
      notify('the dossier was not written: ' .. message, vim.log.levels.ERROR)
      if on_done then on_done(nil, message) end
      return
    end
    local path = vim.uri_to_fname(result.uri)
    notify(('dossier written: %s (%d problems)'):format(path, result.problems or 0))
    if result.settled == false then
      notify('messages kept running while it was written; it may mix two moments: export again when they stop',
        vim.log.levels.WARN)
    end
    if vim.g.deep_research_open_dossier ~= false and vim.ui.open then
      local _, open_err = vim.ui.open(path)
      if open_err then
        notify('could not open it: ' .. tostring(open_err), vim.log.levels.WARN)
      end
    end
    if on_done then on_done(result, nil) end
  end)
end

--- :DeepResearchCompile [FORMAT]: the whole research as one report (deepResearch.compile,
--- written as report.<ext> in the research folder; FORMAT md (default), html, docx, odt, pdf,
--- csl-json or bibtex). Markdown opens in a window; the rest with vim.ui.open, unless
--- vim.g.deep_research_open_report is false. Asynchronous: a large research takes a while.
--- @param bufnr integer
--- @param format string? the format ('' or nil: md)
--- @param on_done fun(result: table?, err: string?)? called when the report is written
function M.compile(bufnr, format, on_done)
  local client = attached_client(bufnr)
  if not client then
    return
  end
  format = (format and format ~= '') and format or 'md'
  local command = {
    title = 'Deep Research: compile', command = 'deepResearch.compile',
    arguments = { { uri = vim.uri_from_bufnr(bufnr), format = format } },
  }
  client:exec_cmd(command, { bufnr = bufnr }, function(err, result)
    if err or type(result) ~= 'table' then
      local message = err and (err.message or vim.inspect(err)) or 'no answer'
      notify('the report was not compiled: ' .. message, vim.log.levels.ERROR)
      if on_done then on_done(nil, message) end
      return
    end
    local path = vim.uri_to_fname(result.uri)
    notify(('report compiled: %s (%d problems, %d references)'):format(path, result.problems or 0,
      result.references or 0))
    if (result.errors or 0) > 0 then
      notify(('the Citation check found %d error(s): see the report\'s last section'):format(result.errors),
        vim.log.levels.WARN)
    end
    if result.settled == false then
      notify('messages kept running while it was compiled; it may mix two moments: compile again when they stop',
        vim.log.levels.WARN)
    end
    if vim.g.deep_research_open_report ~= false then
      if result.format == 'md' then
        vim.cmd.split(vim.fn.fnameescape(path))
      elseif vim.ui.open then
        local _, open_err = vim.ui.open(path)
        if open_err then
          notify('could not open it: ' .. tostring(open_err), vim.log.levels.WARN)
        end
      end
    end
    if on_done then on_done(result, nil) end
  end)
end

-- -- setting up and steering a research -----------------------------------------------------

--- A deep_research client whose workspace holds `folder` (reused when one does; made
--- otherwise, attached to no buffer), passed to `callback` once initialised. Its workspace
--- is the folder and, when the folder is inside it, the current directory: context files
--- and attachments are read from there (the server reads nothing outside its workspace).
local function client_for(folder, callback)
  local config = vim.deepcopy(vim.lsp.config['deep_research'] or {})
  if not config.cmd then
    notify('the deep_research language server is not configured (vim.lsp.config)', vim.log.levels.ERROR)
    return
  end
  local cwd = vim.fs.normalize(vim.fn.getcwd())
  local folders = { { uri = vim.uri_from_fname(folder), name = folder } }
  if cwd ~= folder and vim.startswith(folder, cwd .. '/') then
    table.insert(folders, { uri = vim.uri_from_fname(cwd), name = cwd })
  end
  config.name, config.root_dir, config.workspace_folders = 'deep_research', folder, folders
  local id = vim.lsp.start(config, { attach = false })
  local client = id and vim.lsp.get_client_by_id(id)
  if not client then
    notify('the language server did not start', vim.log.levels.ERROR)
    return
  end
  local waited = 0
  local function ready()
    if client.initialized then
      return callback(client)
    elseif client:is_stopped() or waited > timeout() then
      return notify('the language server did not start', vim.log.levels.ERROR)
    end
    waited = waited + 20
    vim.defer_fn(ready, 20)
  end
  ready()
end

--- Ask with vim.ui.select until the user picks the first choice ("Continue"); `choices`
--- are { label, run(next) } pairs, `run` calling `next` when done. Cancelling (nil) stops.
local function ask_many(prompt, choices, done)
  local labels = vim.tbl_map(function(c) return c[1] end, choices)
  local function again()
    vim.ui.select(labels, { prompt = prompt }, function(_, index)
      if not index then
        return notify('cancelled: nothing was created')
      end
      if index == 1 then
        return done()
      end
      choices[index][2](again)
    end)
  end
  again()
end

--- Ask for a line with vim.ui.input; `then_` gets it trimmed (nil if cancelled).
local function ask(opts, then_)
  vim.ui.input(opts, function(text)
    then_(text and vim.trim(text) or nil)
  end)
end

--- The options object of deepResearch.newResearch: only what was given (empty lists left out).
local function options_of(instruction, context, context_text, attachments)
  local options = vim.empty_dict()
  if instruction ~= '' then options.instruction = instruction end
  if #context > 0 then options.context = context end
  if #context_text > 0 then options.contextText = context_text end
  if #attachments > 0 then options.attachments = attachments end
  return options
end

--- Open the research's message document, and its prompt beside it (focus stays on the message).
local function open_research(result)
  vim.cmd.edit(vim.fn.fnameescape(vim.uri_to_fname(result.document)))
  if result.promptUri then
    local message_win = vim.api.nvim_get_current_win()
    vim.cmd('rightbelow vsplit ' .. vim.fn.fnameescape(vim.uri_to_fname(result.promptUri)))
    vim.api.nvim_set_current_win(message_win)
  end
end

--- Send a setup command and report: a refusal is the server's own sentence.
local function send(client, command, folder, options, on_done)
  local params = { command = command, arguments = { vim.uri_from_fname(folder), options } }
  client:request('workspace/executeCommand', params, function(err, result)
    if err then
      notify(err.message or vim.inspect(err), vim.log.levels.ERROR)
    elseif type(result) == 'table' and result.reason == 'cancelled' then
      notify('cancelled: nothing was changed')
    elseif type(result) == 'table' then
      for _, note in ipairs(result.notes or {}) do  -- what a source became (a folder's files), or a cut
        notify(note, vim.log.levels.INFO)
      end
      open_research(result)
    end
    if on_done then on_done(err == nil and result or nil, err and err.message or nil) end
  end)
end

--- :DeepResearchNew [dir]: the folder (asked if not given), the instruction, context
--- (files or text) and attachments (files or URLs), each step skippable; then the
--- research is made (deepResearch.newResearch: the server reads and fetches everything
--- first) and its message document opens beside the prompt.
--- @param dir string? the research folder (relative to the current directory)
--- @param on_done fun(result: table?, err: string?)? called when the server answered
function M.new_research(dir, on_done)
  local function with_folder(folder)
    if not folder or folder == '' then
      return notify('cancelled: nothing was created')
    end
    folder = vim.fs.normalize(vim.fn.fnamemodify(vim.fn.expand(folder), ':p')):gsub('/$', '')
    if vim.uv.fs_stat(folder .. '/.deep-research/state.json') then
      return notify(folder .. ' already holds a research: open its message.dr, or :DeepResearchContinue',
        vim.log.levels.WARN)
    end
    ask({ prompt = 'Instruction (what should the research find out? empty: skip): ' }, function(instruction)
      if not instruction then
        return notify('cancelled: nothing was created')
      end
      local context, context_text, attachments = {}, {}, {}
      local function create()
        client_for(folder, function(client)
          send(client, 'deepResearch.newResearch', folder,
            options_of(instruction, context, context_text, attachments), on_done)
        end)
      end
      local function ask_attachments()
        ask_many('Attachments (for defining the problem):', {
          { 'Create the research' },
          { 'Attach a file or folder', function(next)
            -- a folder brings its text, markdown, code, HTML and PDF files (the server walks it)
            ask({ prompt = 'File or folder to attach: ', completion = 'file' }, function(path)
              if path and path ~= '' then
                table.insert(attachments, vim.uri_from_fname(vim.fn.fnamemodify(vim.fn.expand(path), ':p')))
              end
              next()
            end)
          end },
          { 'Attach a web page (URL)', function(next)
            ask({ prompt = 'URL (http or https): ' }, function(url)
              if url and url ~= '' then table.insert(attachments, url) end
              next()
            end)
          end },
        }, create)
      end
      ask_many('Context (shown in every prompt):', {
        { 'Continue' },
        { 'Add a context file', function(next)
          ask({ prompt = 'Context file: ', completion = 'file' }, function(path)
            if path and path ~= '' then
              table.insert(context, vim.uri_from_fname(vim.fn.fnamemodify(vim.fn.expand(path), ':p')))
            end
            next()
          end)
        end },
        { 'Type context text', function(next)
          ask({ prompt = 'Context text: ' }, function(text)
            if text and text ~= '' then table.insert(context_text, text) end
            next()
          end)
        end },
      }, ask_attachments)
    end)
  end
  if dir and dir ~= '' then
    return with_folder(dir)
  end
  ask({ prompt = 'Research folder: ', default = vim.fn.getcwd() .. '/', completion = 'dir' }, with_folder)
end

--- :DeepResearchContinue: a new instruction for the research of the current buffer (or of
--- the current directory); a finished research reopens at its root (deepResearch.continueResearch).
--- @param on_done fun(result: table?, err: string?)? called when the server answered
function M.continue_research(on_done)
  local root = vim.fs.root(0, '.deep-research') or vim.fs.root(vim.fn.getcwd(), '.deep-research')
  if not root then
    return notify('no research here: open its message.dr first, or :DeepResearchNew', vim.log.levels.WARN)
  end
  ask({ prompt = 'New instruction (replaces the current one; empty: keep it): ' }, function(instruction)
    if not instruction then
      return notify('cancelled: nothing was changed')
    end
    client_for(root, function(client)
      send(client, 'deepResearch.continueResearch', root, options_of(instruction, {}, {}, {}), on_done)
    end)
  end)
end

-- -- the autopilot ---------------------------------------------------------------------------

--- The autopilot's last state per document URI (`deepResearch/autopilot` notifications).
M.autopilot = {}
M.last_autopilot = nil

local AUTOPILOT_LEVELS = {
  running = vim.log.levels.INFO,
  ['waiting-approval'] = vim.log.levels.WARN,
  finished = vim.log.levels.INFO,
  stopped = vim.log.levels.INFO,
  error = vim.log.levels.ERROR,
}

--- Handler of `deepResearch/autopilot` (lsp/deep_research.lua `handlers`): remember the
--- state for the statusline and say each change once (never once per round).
function M.on_autopilot(_, params)
  if type(params) ~= 'table' or type(params.uri) ~= 'string' then
    return
  end
  local before = M.autopilot[params.uri]
  M.autopilot[params.uri] = params
  M.last_autopilot = params.uri
  pcall(vim.cmd.redrawstatus)
  -- Each researcher whose message starts waiting for approval is said once, with its document.
  local known = {}
  for _, item in ipairs(before and before.waiting or {}) do
    known[item.uri] = true
  end
  for _, item in ipairs(type(params.waiting) == 'table' and params.waiting or {}) do
    if not known[item.uri] then
      notify(('autopilot: the message of %s waits for approval in %s: open it, read it, then :DeepResearchExecute')
        :format(item.researcher == 'main' and 'the main researcher' or ('"' .. item.researcher .. '"'),
          vim.fn.fnamemodify(vim.uri_to_fname(item.uri), ':~:.')), vim.log.levels.WARN)
    end
  end
  if before and before.state == params.state then
    return
  end
  local text = params.state == 'error' and (params.error or params.message) or params.message
  if params.state == 'running' then
    text = 'the autopilot is running (round ' .. (params.round or 0) .. '); :DeepResearchStop stops it'
  elseif params.state == 'waiting-approval' then
    text = (text or 'the model wrote commands above the approval mode')
      .. '. Read or edit the message, then :DeepResearchExecute to approve it and continue'
  end
  if params.state == 'finished' then
    text = (text or 'the research is finished') .. '. :DeepResearchReport opens its answer'
  end
  notify('autopilot: ' .. (text or params.state), AUTOPILOT_LEVELS[params.state] or vim.log.levels.INFO)
  if params.state == 'finished' and vim.g.deep_research_offer_report ~= false then
    vim.schedule(function()
      M.offer_report(params.uri)
    end)
  end
end

--- When the autopilot finishes: ask (vim.ui.select) whether to open the final report.
--- @param uri string the message document the autopilot wrote into
function M.offer_report(uri)
  local choices = { 'Open the final report', 'Not now' }
  vim.ui.select(choices, { prompt = 'Deep Research: the research is finished.' }, function(_, index)
    if index == 1 then
      M.show_report(vim.uri_to_bufnr(uri))
    end
  end)
end

--- For 'statusline': the autopilot of the current buffer's research (or the last run).
--- Example: vim.o.statusline = "%f %{v:lua.require'deep_research'.statusline()}"
--- @return string
function M.statusline()
  local state = M.autopilot[vim.uri_from_bufnr(0)] or (M.last_autopilot and M.autopilot[M.last_autopilot])
  if not state then
    return ''
  end
  local tokens = state.tokens or 0
  local shown = tokens >= 1000 and string.format('%.1fk', tokens / 1000) or tostring(tokens)
  local researchers = (state.researchers or 0) > 1 and string.format(' · %d researchers', state.researchers) or ''
  if state.state == 'running' then
    return string.format('DR autopilot: round %d%s · %s tokens', state.round or 0, researchers, shown)
  elseif state.state == 'waiting-approval' then
    return 'DR autopilot: waiting for approval'
  end
  return 'DR autopilot: ' .. state.state
end

--- :DeepResearchRun [N]: the model writes the next messages into this buffer, and every
--- delegated researcher's into its own document (N of them at once; default: the
--- `parallel` setting, else the research's deep-research.toml).
--- @param bufnr integer
--- @param parallel integer?
function M.run(bufnr, parallel)
  local client = attached_client(bufnr)
  if not client then
    return
  end
  local arguments = { vim.uri_from_bufnr(bufnr) }
  if parallel then
    arguments[2] = { parallel = parallel }
  end
  local command = { title = 'Deep Research: run', command = 'deepResearch.run', arguments = arguments }
  client:exec_cmd(command, { bufnr = bufnr }, function(err, result)
    if err then
      notify('the autopilot did not start: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    elseif type(result) == 'table' and not result.started then
      notify('the autopilot did not start: ' .. tostring(result.message or result.reason), vim.log.levels.WARN)
    end
  end)
end

--- :DeepResearchStop: stop the autopilot (nothing is half-applied).
--- @param bufnr integer
function M.stop(bufnr)
  local client = M.client(bufnr)
  if not client then
    return
  end
  local command = { title = 'Deep Research: stop', command = 'deepResearch.stop', arguments = { vim.uri_from_bufnr(bufnr) } }
  client:exec_cmd(command, { bufnr = bufnr }, function(err)
    if err then
      notify('could not stop the autopilot: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    end
  end)
end

--- :DeepResearchResearchers: the researchers of this buffer's research (main first, then
--- those given a delegated problem), chosen with vim.ui.select; the chosen one's message
--- document opens. `on_done(researcher)` (tests) gets the choice, or nil.
--- @param bufnr integer
--- @param on_done fun(researcher: table?)?
function M.researchers(bufnr, on_done)
  on_done = on_done or function() end
  local client = attached_client(bufnr)
  if not client then
    return on_done(nil)
  end
  local command = {
    title = 'Deep Research: researchers', command = 'deepResearch.researchers', arguments = { vim.uri_from_bufnr(bufnr) },
  }
  client:exec_cmd(command, { bufnr = bufnr }, function(err, result)
    if err or type(result) ~= 'table' then
      notify('could not list the researchers: ' .. (err and (err.message or vim.inspect(err)) or 'no answer'),
        vim.log.levels.ERROR)
      return on_done(nil)
    end
    vim.ui.select(result, {
      prompt = 'Deep Research: open a researcher\'s message document',
      kind = 'deep_research.researcher',
      format_item = function(item)
        local where = item.focus ~= '' and ('at ' .. item.focus) or 'at the root'
        local state = item.state == 'waiting' and 'waits for its delegations' or 'working'
        return ('%s  (%s, %s)'):format(item.name, state, where)
      end,
    }, function(choice)
      if choice then
        vim.cmd.edit(vim.fn.fnameescape(choice.document))
      end
      on_done(choice)
    end)
  end)
end

--- LspAttach: turn on Neovim's LSP completion for the buffer, so that accepting an
--- item (<C-y>, after <C-x><C-o> or autotrigger) applies its text edit and expands
--- block snippets; plain 'omnifunc' completion would insert only the item's word.
local function on_attach(args)
  local client = vim.lsp.get_client_by_id(args.data.client_id)
  if not client or M.client(args.buf) ~= client or vim.g.deep_research_completion == false then
    return
  end
  vim.lsp.completion.enable(true, client.id, args.buf, { autotrigger = vim.g.deep_research_autotrigger == true })
end

--- window/showDocument for our client (lsp/deep_research.lua `handlers`): Neovim's own
--- handler, except that Neovim 0.11's raises E348 ("No string under cursor") when
--- takeFocus is true and the cursor is on an empty line or blank (it reads <cword> for
--- the tag stack), and the message buffer is often empty. Then open the file here.
function M.show_document(err, params, ctx)
  -- A prompt loaded before holds an older version: re-read it from disk first (:edit!
  -- rather than :checktime, which asks the user when 'autoread' is off).
  if type(params) == 'table' and params.uri and not params.external then
    local loaded = vim.fn.bufnr(vim.uri_to_fname(params.uri))
    if loaded > 0 and vim.api.nvim_buf_is_loaded(loaded) and not vim.bo[loaded].modified then
      pcall(vim.api.nvim_buf_call, loaded, function() vim.cmd('silent keepjumps edit!') end)
    end
  end
  local ok, result = pcall(vim.lsp.handlers['window/showDocument'], err, params, ctx)
  if ok then
    return result
  end
  if type(params) ~= 'table' or params.external or not params.takeFocus then
    return { success = false }
  end
  local fname = vim.uri_to_fname(params.uri)
  local win = vim.fn.win_findbuf(vim.fn.bufnr(fname))[1]
  if win then
    vim.api.nvim_set_current_win(win)
  else
    vim.cmd.edit(vim.fn.fnameescape(fname))
  end
  if params.selection then -- the server points at what is new in the prompt
    local line = params.selection.start.line + 1
    pcall(vim.api.nvim_win_set_cursor, 0, { math.min(line, vim.api.nvim_buf_line_count(0)), 0 })
    vim.cmd('normal! zt')
  end
  return { success = true }
end

-- The markdown files of a problem folder (the server's engine/store.py names).
local TREE_FILES = {
  ['Problem Definition.md'] = true,
  ['Criteria of Definition of Done.md'] = true,
  ['Breakdown Structure.md'] = true,
  ['Report 3 Pager.md'] = true,
}

--- root_dir for vim.lsp.config (lsp/deep_research.lua): a message document's research (or
--- none: single-file mode), and for a markdown buffer the research it belongs to, only
--- when it is one of the tree's own files; any other markdown buffer gets no client.
--- @param bufnr integer
--- @param on_dir fun(root: string?)
function M.root_dir(bufnr, on_dir)
  local root = vim.fs.root(bufnr, '.deep-research')
  if vim.bo[bufnr].filetype ~= 'markdown' then
    on_dir(root)
    return
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if not root or name == '' or name:find('/.deep-research/', 1, true) then
    return
  end
  local base = vim.fs.basename(name)
  if TREE_FILES[base] or (vim.fs.basename(vim.fs.dirname(name)) == 'Attachments' and base:match('%.md$')) then
    on_dir(root)
  end
end

--- Called by ftplugin/deep-research.lua for every deep-research buffer.
--- @param bufnr integer
function M.attach_buffer(bufnr)
  local group = vim.api.nvim_create_augroup('deep_research_buffer_' .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd('LspAttach', {
    group = group,
    buffer = bufnr,
    desc = 'Deep Research: LSP completion with snippets',
    callback = on_attach,
  })
  vim.api.nvim_create_autocmd('BufWritePost', {
    group = group,
    buffer = bufnr,
    desc = 'Deep Research: execute the message (code action source.deepResearch.execute)',
    callback = function(args)
      M.on_write(args.buf)
    end,
  })
  vim.api.nvim_buf_create_user_command(bufnr, 'DeepResearchPrompt', function()
    M.show_prompt(bufnr)
  end, { desc = 'Deep Research: open the prompt the assistant sees next' })
  vim.api.nvim_buf_create_user_command(bufnr, 'DeepResearchExecute', function()
    M.execute(bufnr)
  end, { desc = 'Deep Research: execute the message now, approving every command' })
  vim.api.nvim_buf_create_user_command(bufnr, 'DeepResearchUndo', function()
    M.undo(bufnr)
  end, { desc = 'Deep Research: take back the last executed message' })
  vim.api.nvim_buf_create_user_command(bufnr, 'DeepResearchReport', function(opts)
    M.show_report(bufnr, opts.args)
  end, { nargs = '?', desc = 'Deep Research: open the final report (or a problem\'s: titles below the root joined by " / ")' })
  vim.api.nvim_buf_create_user_command(bufnr, 'DeepResearchExport', function()
    M.export(bufnr)
  end, { desc = 'Deep Research: write the research as one HTML file and open it' })
  vim.api.nvim_buf_create_user_command(bufnr, 'DeepResearchCompile', function(opts)
    M.compile(bufnr, opts.args)
  end, {
    nargs = '?',
    complete = function() return { 'md', 'html', 'docx', 'odt', 'pdf', 'csl-json', 'bibtex' } end,
    desc = 'Deep Research: compile the whole research as one report ([FORMAT]: md, html, docx, odt, pdf, csl-json, bibtex)',
  })
  vim.api.nvim_buf_create_user_command(bufnr, 'DeepResearchRun', function(args)
    M.run(bufnr, args.count > 0 and args.count or tonumber(args.args))
  end, {
    nargs = '?', count = 0,
    desc = 'Deep Research: let the model write and run the next messages (the autopilot; [N] researchers at once)',
  })
  vim.api.nvim_buf_create_user_command(bufnr, 'DeepResearchResearchers', function()
    M.researchers(bufnr)
  end, { desc = 'Deep Research: list the researchers and open one\'s message document' })
  vim.api.nvim_buf_create_user_command(bufnr, 'DeepResearchStop', function()
    M.stop(bufnr)
  end, { desc = 'Deep Research: stop the autopilot' })
end

--- Undo attach_buffer (b:undo_ftplugin, when the filetype changes).
--- @param bufnr integer
function M.detach_buffer(bufnr)
  pcall(vim.api.nvim_del_augroup_by_name, 'deep_research_buffer_' .. bufnr)
  pcall(vim.api.nvim_buf_del_user_command, bufnr, 'DeepResearchPrompt')
  pcall(vim.api.nvim_buf_del_user_command, bufnr, 'DeepResearchExecute')
  pcall(vim.api.nvim_buf_del_user_command, bufnr, 'DeepResearchUndo')
  pcall(vim.api.nvim_buf_del_user_command, bufnr, 'DeepResearchReport')
  pcall(vim.api.nvim_buf_del_user_command, bufnr, 'DeepResearchExport')
  pcall(vim.api.nvim_buf_del_user_command, bufnr, 'DeepResearchCompile')
  pcall(vim.api.nvim_buf_del_user_command, bufnr, 'DeepResearchRun')
  pcall(vim.api.nvim_buf_del_user_command, bufnr, 'DeepResearchStop')
  pcall(vim.api.nvim_buf_del_user_command, bufnr, 'DeepResearchResearchers')
end

return M
