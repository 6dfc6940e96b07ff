#!/usr/bin/env python3
"""The tables of the docs, generated from the committed result files in docs/results/.

A result file is a CSV whose first lines are its provenance, one `# key: value` a line (a key may
repeat): title, machine, mpi, measured, commit, command, values, source, note. title, machine,
measured, commit and command are required; a figure whose machine, date, commit or command is not
known says so there ("not recorded in the source"). The header row and the data rows follow.

A doc asks for a table between two comments; everything between them is this script's output:

    <!-- table: results/onenode-np2-hot.csv -->
    <!-- end table -->

The path is relative to the doc. Options after it (shell quoting):
    columns=A|B|C        these columns, in this order (default: all); LABEL:=TEMPLATE is a
                         column made of others ({COLUMN} is the row's value)
    where=COL=V1|V2      only rows whose COL is one of the values (COL!=V: none of them);
                         repeat for more conditions (all must hold)
    rows=T cols=T cell=T a pivot: one row per distinct rows template, one column per distinct
                         cols template, the cell template in between ({COLUMN} is the row's value;
                         several rows in one cell are joined with " / "), corner=TEXT heads the
                         first column; [TEXT] in a template is left out where a {COLUMN}
                         in it is empty
    values=no            leave out the line that says what the numbers are
    commands=no          leave out the commands (when the text around gives them)

Under the table come what the numbers are, where they were measured (date, machine, MPI, commit,
the data file) and the commands that reproduce them.

    scripts/doc_tables.py            rewrite the tables of README.md, docs/*.md and
                                     docs/results/README.md in place
    scripts/doc_tables.py --check    exit 1 (and print the difference) where a doc is stale, or
                                     where a result file lacks its provenance
    scripts/doc_tables.py --unused   list the result files no table shows (the index lists all)
    --root DIR                       the tree to read (default: the one this script is in)

`<!-- index -->` ... `<!-- end table -->` in a doc of docs/results/ lists every result file of
that folder with its title, machine, date, commit and commands (docs/results/README.md).
"""
import csv
import difflib
import glob
import io
import os
import re
import shlex
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIRED = ('title', 'machine', 'measured', 'commit', 'command')
KNOWN = REQUIRED + ('mpi', 'values', 'source', 'note')
BEGIN = re.compile(r'^<!-- (?:table: (\S+)(.*?)|(index)) -->\s*$')
END = '<!-- end table -->'


class Failure(Exception):
    pass


def read_result(path):
    """(provenance dict of lists, header, rows) of one result file."""
    prov, body = {}, []
    with open(path, newline='') as f:
        for line in f:
            if not body and line.startswith('#'):
                m = re.match(r'^# ([a-z]+): (.*)$', line.rstrip('\n'))
                if not m or m.group(1) not in KNOWN:
                    raise Failure('%s: provenance line not understood: %s' % (path, line.rstrip()))
                prov.setdefault(m.group(1), []).append(m.group(2))
            else:
                body.append(line)
    missing = [k for k in REQUIRED if k not in prov]
    if missing:
        raise Failure('%s: provenance lacks %s' % (path, ', '.join(missing)))
    table = list(csv.reader(io.StringIO(''.join(body))))
    if not table:
        raise Failure('%s: no header row' % path)
    header, rows = table[0], table[1:]
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise Failure('%s: data row %d has %d cells, the header %d' % (path, i + 1, len(row), len(header)))
    return prov, header, rows


def fill(template, record, path):
    def one(m):
        if m.group(1) not in record:
            raise Failure('%s: no column "%s"' % (path, m.group(1)))
        return record[m.group(1)]

    def optional(m):
        names = re.findall(r'\{([^{}]+)\}', m.group(1))
        if any(record.get(n, '') == '' for n in names):
            return ''
        return m.group(1)
    template = re.sub(r'\[([^\[\]]*)\]', optional, template)
    return re.sub(r'\{([^{}]+)\}', one, template).strip()


def cell(text):
    return text.replace('|', '\\|')


def markdown(header, rows):
    out = ['| ' + ' | '.join(cell(h) for h in header) + ' |', '|' + '---|' * len(header)]
    out += ['| ' + ' | '.join(cell(c) for c in row) + ' |' for row in rows]
    return out


def provenance(prov, name, link):
    """One paragraph: where, when and from what the figures of a result file came."""
    line = 'Machine: %s' % '; '.join(prov['machine'])
    if 'mpi' in prov:
        line += '; ' + '; '.join(prov['mpi'])
    line += '. Measured: %s. collx: %s. Data: [%s](%s)' % (
        '; '.join(prov['measured']), '; '.join(prov['commit']), name, link)
    if 'source' in prov:
        line += ', ' + '; '.join(prov['source'])
    return line + '.'


# Which docs show each result file as a table (filled by main() before docs/results/README.md,
# which comes last), and the largest file the index shows whole.
SHOWN = {}
INDEX_TABLE_ROWS = 100


def index(doc_dir):
    """Every result file in the doc's own folder: its title, machine, date, commit and commands,
    and its table where no other doc shows it and it is small enough."""
    out = []
    for path in sorted(glob.glob(os.path.join(doc_dir, '*.csv'))):
        prov, header, rows = read_result(path)
        name = os.path.basename(path)
        out += ['### [%s](%s)' % (name, name), '', '%s (%d rows).' % ('; '.join(prov['title']), len(rows)), '']
        line = 'Machine: %s' % '; '.join(prov['machine'])
        if 'mpi' in prov:
            line += '; ' + '; '.join(prov['mpi'])
        out += [line + '. Measured: %s. collx: %s.' % ('; '.join(prov['measured']), '; '.join(prov['commit']))]
        if 'values' in prov:
            out += ['', '; '.join(prov['values']) + '.']
        out += [''] + ['    ' + c for c in prov['command']] + ['']
        docs = SHOWN.get(os.path.normpath(path), [])
        if docs:
            out += ['Shown in %s.' % ', '.join(
                '[%s](%s)' % (d, os.path.relpath(os.path.join(ROOT, d), doc_dir)) for d in docs), '']
        elif len(rows) <= INDEX_TABLE_ROWS:
            out += markdown(header, rows) + ['']
        else:
            out += ['Too long to show here: the file itself.', '']
    return out


def render(doc_dir, target, options):
    path = os.path.normpath(os.path.join(doc_dir, target))
    prov, header, rows = read_result(path)
    opts, wheres = {}, []
    for word in shlex.split(options):
        key, sep, value = word.partition('=')
        if not sep:
            raise Failure('%s: option "%s" needs a value' % (target, word))
        if key == 'where':
            wheres.append(value)
        elif key in ('columns', 'rows', 'cols', 'cell', 'corner', 'values', 'commands'):
            opts[key] = value
        else:
            raise Failure('%s: unknown option "%s"' % (target, key))
    records = [dict(zip(header, r)) for r in rows]
    for w in wheres:
        m = re.match(r'^(.+?)(!?=)(.*)$', w)
        if not m or m.group(1) not in header:
            raise Failure('%s: where=%s names no column' % (target, w))
        col, op, allowed = m.group(1), m.group(2), m.group(3).split('|')
        records = [r for r in records if (r[col] in allowed) == (op == '=')]
    if not records:
        raise Failure('%s: no row is left to show' % target)
    if 'rows' in opts or 'cols' in opts or 'cell' in opts:
        if not all(k in opts for k in ('rows', 'cols', 'cell')):
            raise Failure('%s: a pivot needs rows=, cols= and cell=' % target)
        row_keys, col_keys, cells = [], [], {}
        for r in records:
            rk, ck = fill(opts['rows'], r, path), fill(opts['cols'], r, path)
            if rk not in row_keys:
                row_keys.append(rk)
            if ck not in col_keys:
                col_keys.append(ck)
            cells.setdefault((rk, ck), []).append(fill(opts['cell'], r, path))
        table = markdown([opts.get('corner', '')] + col_keys,
                         [[rk] + [' / '.join(cells.get((rk, ck), [])) for ck in col_keys] for rk in row_keys])
    else:
        labels, templates = [], []
        for c in (opts['columns'].split('|') if 'columns' in opts else header):
            label, sep, template = c.partition(':=')
            if not sep:
                if c not in header:
                    raise Failure('%s: no column "%s"' % (target, c))
                template = '{%s}' % c
            labels.append(label)
            templates.append(template)
        table = markdown(labels, [[fill(t, r, path) for t in templates] for r in records])
    out = table + ['']
    line = ''
    if opts.get('values', 'yes') != 'no' and 'values' in prov:
        line = '; '.join(prov['values']) + '. '
    out += [line + provenance(prov, target, target), '']
    if opts.get('commands', 'yes') != 'no':
        out += ['    ' + c for c in prov['command']] + ['']
    return out


def regenerate(doc_path):
    """(the doc as it should be, the result files it shows)"""
    doc_dir = os.path.dirname(doc_path)
    lines = open(doc_path).read().split('\n')
    out, used, i = [], [], 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        out.append(lines[i])
        i += 1
        if not m:
            continue
        j = i
        while j < len(lines) and lines[j].strip() != END:
            if BEGIN.match(lines[j]):
                break
            j += 1
        if j == len(lines) or lines[j].strip() != END:
            raise Failure('%s:%d: "%s" without its "%s"' % (doc_path, i, lines[i - 1].strip(), END))
        try:
            if m.group(3):
                out += [''] + index(doc_dir)
            else:
                out += [''] + render(doc_dir, m.group(1), m.group(2))
                used.append(os.path.normpath(os.path.join(doc_dir, m.group(1))))
        except (Failure, OSError) as e:
            raise Failure('%s:%d: %s' % (os.path.relpath(doc_path, ROOT), i, e))
        out.append(lines[j])
        i = j + 1
    return '\n'.join(out), used


def main(argv):
    global ROOT
    check = '--check' in argv
    if '--root' in argv:
        ROOT = os.path.abspath(argv[argv.index('--root') + 1])
    docs = ([os.path.join(ROOT, 'README.md')] + sorted(glob.glob(os.path.join(ROOT, 'docs', '*.md')))
            + glob.glob(os.path.join(ROOT, 'docs', 'results', 'README.md')))
    stale, used = [], set()
    try:
        for results in sorted(glob.glob(os.path.join(ROOT, 'docs', 'results', '*.csv'))):
            read_result(results)
        for doc in docs:
            old = open(doc).read()
            new, shown = regenerate(doc)
            used.update(shown)
            for path in shown:
                SHOWN.setdefault(path, [])
                if os.path.relpath(doc, ROOT) not in SHOWN[path]:
                    SHOWN[path].append(os.path.relpath(doc, ROOT))
            if new == old:
                continue
            name = os.path.relpath(doc, ROOT)
            if check:
                stale.append(name)
                sys.stdout.writelines(difflib.unified_diff(
                    old.splitlines(True), new.splitlines(True), name + ' (committed)', name + ' (from docs/results)'))
            else:
                open(doc, 'w').write(new)
                print('doc_tables: rewrote the tables of %s' % name)
    except Failure as e:
        print('doc_tables: %s' % e, file=sys.stderr)
        return 1
    if '--unused' in argv:
        for results in sorted(glob.glob(os.path.join(ROOT, 'docs', 'results', '*.csv'))):
            if os.path.normpath(results) not in used:
                print(os.path.relpath(results, ROOT))
    if stale:
        print('doc_tables: %s not generated from docs/results as committed; run scripts/doc_tables.py'
              % ', '.join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
