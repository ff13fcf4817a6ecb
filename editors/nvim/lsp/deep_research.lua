-- The Deep Research language server, for Neovim 0.11's vim.lsp.config / vim.lsp.enable:
--
--   vim.opt.rtp:append('/path/to/deep-research/editors/nvim')
--   vim.lsp.enable('deep_research')
--
-- Override any field with vim.lsp.config('deep_research', { ... }), for example
-- cmd = { '/path/to/.venv/bin/deep-research', 'serve' } or another approvalMode.
return {
  cmd = { 'deep-research', 'serve' },
  -- Markdown too, but only the research tree's own files (see root_dir): the server shows
  -- `deep-research check`'s findings on them.
  filetypes = { 'deep-research', 'markdown' },
  -- The research root is the folder holding `.deep-research/`. A .dr file outside any
  -- research still gets a client (single-file mode, no root): the server then offers
  -- the quick fix "Make this folder a research". A markdown buffer gets one only if it is
  -- a file of a research tree; any other is left alone.
  root_dir = function(bufnr, on_dir)
    return require('deep_research').root_dir(bufnr, on_dir)
  end,
  -- The showDocument handler below re-reads a prompt changed on disk (:checktime), so the
  -- server may point at the prompt's newest lines.
  init_options = { reloadsChangedFiles = true },
  handlers = {
    -- Neovim's handler, plus a fallback for a Neovim 0.11 bug (see lua/deep_research).
    ['window/showDocument'] = function(...)
      return require('deep_research').show_document(...)
    end,
    -- The autopilot's state: notified once per change, kept for M.statusline().
    ['deepResearch/autopilot'] = function(...)
      return require('deep_research').on_autopilot(...)
    end,
  },
  settings = {
    deepResearch = {
      -- Which command kinds run on write without asking: none, read, create, update, delete.
      approvalMode = 'update',
      -- Neovim executes through the code action on write (ftplugin/deep-research.lua),
      -- so the server must not execute on didSave as well.
      executeOnSave = false,
    },
  },
}
