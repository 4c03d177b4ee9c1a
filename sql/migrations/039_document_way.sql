-- 039: which way each document went, and the document template its file went on.
--
-- A document reaches the person as text parts (in their window), as one PDF
-- file on a document template (outside it, no reply needed), or as one
-- `document` message (in it); after a knock, as parts or a file once they
-- answered (docs/design/files.md). `way` says which: while it is being sent,
-- the form its ledger holds ('parts', 'file', 'file_in_window'; NULL: not
-- decided yet, or parts begun before this migration); once delivered, the
-- whole way, the knock included ('knock_then_parts', 'knock_then_file').
-- A file ledger is one row of delivery_chunks (chunk 0) with no text: its
-- fence, its tag and its statuses are a part's.
--
-- file_template / file_template_language: the document template of the file's
-- latest send, written under the claim before it is fenced, so that a failed
-- status of it, which names no template, holds the right one.
--
-- Documents delivered before this migration have no way: the views read it
-- from their knock (coalesce), and nothing is rewritten.
ALTER TABLE documents
    ADD COLUMN way text CHECK (way IN ('parts', 'knock_then_parts', 'file', 'file_in_window',
                                       'knock_then_file')),
    ADD COLUMN file_template text,
    ADD COLUMN file_template_language text;

-- people.outside_window: how this person's documents go while their window is
-- closed, whatever DELIVERY_FILE_OUTSIDE_WINDOW says of the kind: 'knock' (a
-- person who should be asked first), 'file' (every kind as a file, when a
-- document template is healthy); NULL: by kind, the deployment's choice.
ALTER TABLE people
    ADD COLUMN outside_window text CHECK (outside_window IN ('knock', 'file'));
