;;; scenario.el --- a real Emacs with eglot against the real server (tests/emacs/test_emacs.py)
;;
;; Batch mode, Debian's emacs-nox 28 and elpa-eglot 1.9 (scripts/setup-emacs-test-env).
;; The configuration is docs/editors.md's, word for word where Emacs 28 allows. Steps:
;; open the research's message.dr through eglot, receive the diagnostic of a typo through
;; Flymake, complete `///' into define_problem with completion-at-point, run the code
;; action "execute" and see the tree written and the buffer cleared by the server's edit.
;; Observations go to $DR_OUT as JSON; exit status 0 passed, 1 failed. Nothing sleeps:
;; every wait is accept-process-output until a condition holds, with a deadline.

(setq package-directory-list (list "/usr/share/emacs/site-lisp/elpa"))
(package-initialize)
(require 'eglot)
(require 'json)

;; -- docs/editors.md, "Emacs (eglot)" -----------------------------------------------------
(define-derived-mode deep-research-mode text-mode "Deep-Research"
  "Major mode for Deep Research message documents (.dr)."
  ;; `///' and `<<<' are punctuation, not part of a word: completion after `///' then
  ;; matches the command names (eglot before 1.10 matches labels, not filterText).
  (modify-syntax-entry ?/ ".")
  (modify-syntax-entry ?< ".")
  (modify-syntax-entry ?> "."))
(add-to-list 'auto-mode-alist '("\\.dr\\'" . deep-research-mode))
(with-eval-after-load 'eglot
  (add-to-list 'eglot-server-programs
               `(deep-research-mode . ,(append (json-parse-string (getenv "DR_SERVER_CMD") :array-type 'list) nil))))
(setq-default eglot-workspace-configuration
              '(:deepResearch (:approvalMode "update" :executeOnSave t)))
(setq eglot-confirm-server-initiated-edits nil)
(add-hook 'deep-research-mode-hook #'eglot-ensure)
;; -------------------------------------------------------------------------------------------

(defvar dr-observed nil)
(defun dr-record (key value) (push (cons key value) dr-observed))

(defun dr-wait (what predicate &optional seconds)
  "Run the event loop until PREDICATE holds, or fail naming WHAT."
  (let ((deadline (+ (float-time) (or seconds 20))))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (unless (funcall predicate) (error "Timed out waiting for %s" what))))

(defun dr-changed ()
  "What the idle timers do after typing, which batch mode never runs: send the change, run Flymake."
  (eglot--signal-textDocument/didChange)
  (flymake-start))

(defun dr-finish (ok err)
  (dr-record 'ok (if ok t :false))
  (when err (dr-record 'error (format "%s" err)))
  (with-temp-file (getenv "DR_OUT") (insert (json-encode dr-observed)))
  (ignore-errors (eglot-shutdown (eglot-current-server)))
  (kill-emacs (if ok 0 1)))

(condition-case err
    (let* ((file (getenv "DR_FILE"))
           (root (file-name-directory file)))
      (find-file file)
      (dr-record 'major-mode (symbol-name major-mode))
      ;; eglot-ensure connects from post-command-hook, which batch mode never runs.
      (unless (eglot-current-server) (eglot-ensure) (run-hooks 'post-command-hook))
      (dr-wait "eglot to connect" (lambda () (let ((s (eglot-current-server))) (and s (jsonrpc-running-p s)))))
      (dr-record 'language-id (eglot--language-id (eglot-current-server)))
      (dr-record 'server (plist-get (eglot--server-info (eglot-current-server)) :name))

      ;; 1. a typo gets a diagnostic through Flymake
      (insert "Thinking first.\n///focus_upp\n")
      (dr-changed)
      (dr-wait "the diagnostic of the typo"
               (lambda () (cl-some (lambda (d) (string-match-p "focus_up" (flymake-diagnostic-text d)))
                                   (flymake-diagnostics))))
      (dr-record 'diagnostics (mapcar #'flymake-diagnostic-text (flymake-diagnostics)))

      ;; 2. completion-at-point after `///' at the start of a line: define_problem, the only command now
      (erase-buffer)
      (insert "///")
      (dr-changed)
      (let ((completion-auto-help nil))
        (completion-at-point))
      (dr-record 'completed (buffer-string))

      ;; 3. the code action "execute" runs the message: the tree is written, the buffer cleared
      (erase-buffer)
      (insert "<<< define_problem\n///title\nTiled matrix multiplication\n///content\nWhich tiles are fastest?\n>>>\n"
              "///add_criteria Cites three sources\n")
      (dr-changed)
      (dr-wait "the diagnostics of the message" (lambda () (null (flymake-diagnostics))))
      (let ((actions (eglot-code-actions (point-min) (point-max) "source.deepResearch.execute")))
        (dr-record 'actions (mapcar (lambda (a) (plist-get a :title)) actions)))
      (eglot-code-actions (point-min) (point-max) "source.deepResearch.execute" t)
      (dr-wait "the server to clear the executed message" (lambda () (string-empty-p (buffer-string))))
      (dr-record 'definition (with-temp-buffer
                               (insert-file-contents (expand-file-name "Problem Definition.md" root))
                               (buffer-string)))
      (save-buffer) ; the empty document: executeOnSave finds nothing to run
      (dr-record 'saved (with-temp-buffer (insert-file-contents file) (buffer-string)))
      (dr-finish t nil))
  (error (dr-finish nil err)))
