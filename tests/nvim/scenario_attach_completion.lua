-- Attach, then completion after `///` in a fresh research.
local H = dofile(vim.env.DR_HARNESS)
H.run(function()
  H.setup()
  local buf, client = H.open()
  H.record('filetype', vim.bo[buf].filetype)
  H.record('client', {
    name = client.name,
    root_dir = client.root_dir,
    server = client.server_info and client.server_info.name,
    encoding = client.offset_encoding,
    commands = (client.server_capabilities.executeCommandProvider or {}).commands,
  })
  H.record('omnifunc', vim.bo[buf].omnifunc)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { '///' })
  local labels, items = H.complete(buf, client, 0, 3)
  H.record('labels', labels)
  H.record('first_item', items[1])
end)
