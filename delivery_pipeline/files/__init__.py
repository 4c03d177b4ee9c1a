"""Documents as files: a body rendered once as a PDF, kept in Postgres beside it.

``layout`` reads a body's shape (headings, paragraphs, list items) and keeps
only what the font can draw; ``pdf`` draws it with fpdf2 and the DejaVu Sans
subset in ``fonts/``; ``words`` holds the few words a file adds in each locale
(its title, its date, its name); ``stored`` renders a document's file when it
has none for its current body and keeps it in ``document_files``. No Dagster,
no web framework: the generation worker and the senders call it alike.
"""
