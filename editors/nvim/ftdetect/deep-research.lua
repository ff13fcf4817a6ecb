-- Deep Research messages: *.dr files get the filetype `deep-research`
-- (also the LSP language id the server expects).
vim.filetype.add({ extension = { dr = 'deep-research' } })
