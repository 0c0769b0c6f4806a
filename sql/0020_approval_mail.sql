-- approvals answered by mail (runtime/approvals.md): a reply to the
-- question's mail names its Message-ID (notice_ref "email:<Message-ID>")
-- in In-Reply-To or References; the index finds the question from it.
-- answer_key is the dedupe key of the message that answered (a mail's
-- "email:<mailbox>:<Message-ID>"), so the same mail delivered again is
-- recognised as the answer it already gave ('' for other answers).
ALTER TABLE approvals ADD COLUMN answer_key text NOT NULL DEFAULT '';

CREATE INDEX approvals_notice ON approvals (notice_ref)
  WHERE notice_ref <> '';
