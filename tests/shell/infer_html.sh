#!/usr/bin/env bash
# classify_one, classify_many and top_n as pages (a request that does not want JSON)
# against a real server and a trained LeNet: the structure DIGITS's templates have and
# its tests parse (ul.list-group items "NN.NN% label", the summary, the confusion matrix,
# a row per classified image, a row per class with its name in an h3), the same numbers
# as the JSON answers, errors as pages with their status, every hostile name escaped
# (an upload's file name, an image path, a line that cannot be read), and the note of a
# network with more outputs than the dataset has labels, in JSON and on the page.
. "$(dirname "$0")/infer_lib.bash" || exit 1
. "$(dirname "$0")/server_tiny_net.bash"
infer_setup

http GET "/datasets/$DS/json"
LABELS=$(jv 'd["labels"]')
ONE=/models/images/classification/classify_one
MANY=/models/images/classification/classify_many
TOPN=/models/images/classification/top_n
IMG=$(ls "$T/images/columns/"*.png | head -1)

# The page in $T/body as JSON in $T/page.json: the ul.list-group items split on white
# space, the tables by class (rows of cell texts), the h3 and dd texts, the img srcs, the
# note. Percentages on a page are "NN.NN%", compared as numbers with the JSON answers.
cat >"$T/parse.py" <<'EOF'
import html.parser, json, sys
class P(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.lg = 0; self.li = None; self.items = []
        self.tables = {}; self.table = None; self.row = None; self.cell = None
        self.h3 = None; self.h3s = []; self.imgs = []; self.note = None; self.in_note = False
        self.dd = None; self.dds = []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs); cls = (a.get("class") or "").split()
        if tag == "ul" and "list-group" in cls: self.lg += 1
        elif tag == "li" and self.lg: self.li = []
        elif tag == "table": self.table = self.tables.setdefault(" ".join(c for c in cls if c != "table"), [])
        elif tag == "tr" and self.table is not None: self.row = []
        elif tag in ("td", "th") and self.row is not None: self.cell = []
        elif tag == "h3": self.h3 = []
        elif tag == "dd": self.dd = []
        elif tag == "img": self.imgs.append(a.get("src"))
        elif tag == "div" and "note" in cls: self.in_note = True; self.note = ""
    def handle_endtag(self, tag):
        if tag == "li" and self.li is not None: self.items.append("".join(self.li).split()); self.li = None
        elif tag == "ul" and self.lg: self.lg -= 1
        elif tag in ("td", "th") and self.cell is not None: self.row.append(" ".join("".join(self.cell).split())); self.cell = None
        elif tag == "tr" and self.row is not None: self.table.append(self.row); self.row = None
        elif tag == "table": self.table = None
        elif tag == "h3" and self.h3 is not None: self.h3s.append("".join(self.h3).strip()); self.h3 = None
        elif tag == "dd" and self.dd is not None: self.dds.append("".join(self.dd).strip()); self.dd = None
        elif tag == "div": self.in_note = False
    def handle_data(self, data):
        for part in (self.li, self.cell, self.h3, self.dd):
            if part is not None: part.append(data)
        if self.in_note: self.note += data
p = P()
p.feed(open(sys.argv[1], encoding="utf-8").read())
json.dump({"items": p.items, "tables": p.tables, "h3": p.h3s, "dd": p.dds, "imgs": p.imgs, "note": p.note}, open(sys.argv[2], "w"))
EOF
page() { python3 "$T/parse.py" "$T/body" "$T/page.json"; }
pj() {
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
try:
    v = eval(sys.argv[2])
except Exception as e:
    v = "<%s>" % type(e).__name__
print(json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else v)' "$T/page.json" "$1"
}
ctype() { tr -d '\r' <"$T/hdr" | awk -F': ' 'tolower($1) == "content-type" { print $2 }' | tail -1; }

# ---- classify_one ---------------------------------------------------------------------------
http POST "$ONE/json" -F job_id="$ML" -F image_file="@$IMG;filename=image.png"
WANT=$(jv 'd["predictions"]')
TOP=$(jv 'd["predictions"][0][0]')
check '[ "$CODE" = 200 ] && [ "$(jv "\"note\" in d")" = false ]' "a network with as many outputs as labels has no note"
http POST "$ONE?job_id=$ML" -D "$T/hdr" -F "image_file=@$IMG;filename=image.png" -F show_visualizations=y
page
check '[ "$CODE" = 200 ] && ctype | grep -q "^text/html"' "classify_one without .json is a page (text/html)"
csp() { tr -d '\r' <"$T/hdr" | awk -F': ' 'tolower($1) == "content-security-policy" { print $2 }' | tail -1; }
check 'csp | grep -q "img-src '"'"'self'"'"' data:" && csp | grep -q "default-src '"'"'self'"'"'" && ! csp | grep -q "script-src"' \
    "the page's policy lets its inline image show, and nothing but the server's scripts run"
check '[ "$(pj "[[i[1], float(i[0].rstrip(\"%\"))] for i in d[\"items\"] if i[0].endswith(\"%\")]")" = "$WANT" ]' \
    "its ul.list-group items split into [percent%, label], the JSON answer's predictions in order"
check '[ "$(pj "len(d[\"items\"]) == 3 and all(len(i) == 2 for i in d[\"items\"])")" = true ]' "three items of two words"
check '[ "$(pj "d[\"items\"][0][1]")" = "$TOP" ]' "the first item is the top prediction ($TOP)"
check '[ "$(pj "sorted(r[0].split()[0] for r in d[\"tables\"][\"visualizations\"][1:] if \"Weights\" in r[0])")" = "[\"conv1\", \"conv2\", \"ip1\", \"ip2\"]" ]' \
    "show_visualizations adds the table of layers, weights of conv1, conv2, ip1 and ip2"
check '[ "$(pj "d[\"imgs\"][0].startswith(\"data:image/png;base64,\") and all(\"/files/\" in s for s in d[\"imgs\"][1:])")" = true ]' \
    "the upload is shown as a data URI and each visualization from /files/"
http POST "$ONE" -D "$T/hdr" -H 'Accept: application/json' -F job_id="$ML" -F image_path="$IMG"
check '[ "$CODE" = 200 ] && ctype | grep -q "^application/json" && [ "$(jv "d[\"predictions\"]")" = "$WANT" ]' \
    "the same route answers JSON when Accept asks for it"
http POST "$ONE" -F job_id="$ML" -F image_path="$IMG"
page
check '[ "$CODE" = 200 ] && [ "$(pj "d[\"imgs\"][0]")" = "/browse/file?path=$IMG" ]' "an image_path is shown from /browse/file"

# a hostile upload name is escaped wherever it appears
HOSTILE="<script>alert(1)</script>&'x.png"
http POST "$ONE" -F job_id="$ML" -F "image_file=@$IMG;filename=$HOSTILE"
check '[ "$CODE" = 200 ] && grep -qF "&lt;script&gt;alert(1)&lt;/script&gt;&amp;&#39;x.png" "$T/body" && ! grep -qF "<script>alert" "$T/body"' \
    "an uploaded file name with markup is shown escaped, never as markup"
printf 'not an image\n' >"$T/note.txt"
http POST "$ONE" -D "$T/hdr" -F job_id="$ML" -F "image_file=@$T/note.txt;filename=$HOSTILE"
check '[ "$CODE" = 400 ] && ctype | grep -q "^text/html" && grep -q "not a PNG, JPEG, BMP, PGM or PPM image" "$T/body"' \
    "a non-image upload is a 400 page saying why"
check 'grep -qF "&lt;script&gt;" "$T/body" && ! grep -qF "<script>alert" "$T/body"' "the error page escapes the file name"

# errors keep their status, as pages
http POST "$ONE" -D "$T/hdr" -F job_id="$ML"
check '[ "$CODE" = 400 ] && ctype | grep -q "^text/html" && grep -q "must provide image_path or image_file" "$T/body"' \
    "no image is a 400 page"
http POST "$ONE" -D "$T/hdr" -F job_id=20000101-000000-dead -F image_path="$IMG"
check '[ "$CODE" = 404 ] && ctype | grep -q "^text/html" && grep -q "Job not found" "$T/body"' "an unknown job is a 404 page"
http POST "$ONE" -F job_id="$ML" -F image_path=/etc/hostname
check '[ "$CODE" = 400 ] && grep -q "image_path" "$T/body" && grep -q outside "$T/body"' \
    "a path outside the data roots is a 400 page naming image_path"
http POST "$ONE/json" -D "$T/hdr" -F job_id="$ML"
check '[ "$CODE" = 400 ] && ctype | grep -q "^application/json" && jv "d[\"error\"][\"description\"]" | grep -q "image_path or image_file"' \
    "classify_one/json still answers its errors as JSON"

# ---- classify_many ---------------------------------------------------------------------------
mkdir -p "$T/images/odd"
HNAME='<b>bold&"q'"'"'.png'
cp "$IMG" "$T/images/odd/$HNAME"
py '
labels = json.loads(sys.argv[1]); root = sys.argv[2]
with open(sys.argv[3], "w") as out:
    for k, name in enumerate(labels):
        for f in sorted(os.listdir(os.path.join(root, name)))[:4]:
            out.write("%s/%s/%s %d\n" % (root, name, f, k))
    out.write("%s/odd/%s 1\n" % (root, sys.argv[4]))
    out.write("%s/odd/<i>missing</i>.png 0\n" % root)' "$LABELS" "$T/images" "$T/list.txt" "$HNAME"
http POST "$MANY/json" -F job_id="$ML" -F image_list="@$T/list.txt"
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"classifications\"])")" = 13 ]' "classify_many/json classifies the 13 images"
WANT_PATHS=$(jv 'list(d["classifications"])')
# each row: the ground truth (the line's label), then label and percent of each prediction
WANT_ROWS=$(jv "[[$LABELS[int(l.split()[-1])]] + [x for p in c for x in p] for l, c in zip(open(\"$T/list.txt\").read().splitlines(), d[\"classifications\"].values())]")
WANT_HEAD=$(jv '[""] + d["labels"] + ["Per-class accuracy"]')
WANT_MATRIX=$(jv 'd["confusion_matrix"]')
WANT_TOP1=$(jv 'd["top1_accuracy"]')
WANT_TOP5=$(jv 'd["top5_accuracy"]')
http POST "$MANY?job_id=$ML" -D "$T/hdr" -F image_list="@$T/list.txt"
page
check '[ "$CODE" = 200 ] && ctype | grep -q "^text/html"' "classify_many without .json is a page"
check '[ "$(pj "[r[1] for r in d[\"tables\"][\"classifications\"][1:]]")" = "$WANT_PATHS" ]' \
    "a row per classified image, in list order, named as the list names it"
check '[ "$(pj "[[r[2]] + [x if i % 2 == 0 else float(x.rstrip(\"%\")) for i, x in enumerate(r[3:])] for r in d[\"tables\"][\"classifications\"][1:]]")" = "$WANT_ROWS" ]' \
    "each row has the ground truth, then label and percent of the JSON answer's predictions"
check '[ "$(pj "d[\"tables\"][\"confusion-matrix\"][0]")" = "$WANT_HEAD" ]' \
    "the confusion matrix has a column per label and the per-class accuracy"
check '[ "$(pj "[[int(x) for x in r[1:-1]] for r in d[\"tables\"][\"confusion-matrix\"][1:]]")" = "$WANT_MATRIX" ]' \
    "its counts are the JSON answer's confusion matrix"
check '[ "$(pj "[float(x.rstrip(\"%\")) for x in d[\"dd\"][:2]] == [$WANT_TOP1, $WANT_TOP5]")" = true ]' \
    "the summary shows the JSON answer's top-1 and top-5 accuracy ($WANT_TOP1, $WANT_TOP5)"
check 'grep -qF "&lt;b&gt;bold&amp;&quot;q&#39;.png" "$T/body" && ! grep -qF "<b>bold" "$T/body"' \
    "an image path with markup is shown escaped"
check 'grep -qF "&lt;i&gt;missing&lt;/i&gt;.png" "$T/body" && ! grep -qF "<i>missing</i>" "$T/body"' \
    "a line that cannot be read is listed under the skipped lines, escaped"
http POST "$MANY" -D "$T/hdr" -F job_id="$ML"
check '[ "$CODE" = 400 ] && ctype | grep -q "^text/html" && grep -q "image_list is a required field" "$T/body"' \
    "classify_many without image_list is a 400 page"

# ---- top_n ---------------------------------------------------------------------------------
http POST "$TOPN?job_id=$ML" -D "$T/hdr" -F image_list="@$T/list.txt" -F top_n=2
page
check '[ "$CODE" = 200 ] && ctype | grep -q "^text/html"' "top_n without /json is a page"
check '[ "$(pj "sorted(d[\"h3\"]) == sorted($LABELS)")" = true ]' \
    "a row per class with its name in an h3"
check '[ "$(pj "len(d[\"imgs\"])")" = 6 ] && [ "$(pj "all(s.startswith(\"/browse/file?path=\") for s in d[\"imgs\"])")" = true ]' \
    "top_n=2 shows two images of each class from /browse/file"
SRC1=$(pj 'd["imgs"][0]')
curl -s -o "$T/top.png" "$B$SRC1"
check '[ "$(head -c 4 "$T/top.png" | od -An -c | tr -d " ")" = "211PNG" ]' "the first image's src serves the PNG"
http POST "$TOPN" -F job_id="$ML" -F image_list="@$T/list.txt" -F top_n=0
check '[ "$CODE" = 400 ] && grep -q "top_n" "$T/body" && grep -q "<html" "$T/body"' "top_n=0 is a 400 page naming top_n"

# ---- more outputs than labels: the note ----------------------------------------------------------
form_net Wide12 16 12 no >"$T/wide.prototxt"
post_model "$T/wide.prototxt" wide12 1 -F batch_size=8 -F learning_rate=0.01 -F random_seed=3
WIDE=$MODEL
if ! wait_status "$WIDE" Done 300; then
    echo "FAIL the network of 12 outputs did not train: $BODY"
    finish
fi
NOTE="the network has 12 outputs and the dataset 3 labels: outputs 4 to 12 are not shown"
http POST "$ONE/json" -F job_id="$WIDE" -F image_path="$IMG"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"note\"]")" = "$NOTE" ] && [ "$(jv "len(d[\"predictions\"])")" = 3 ]' \
    "classify_one/json of 12 outputs on 3 labels: 3 predictions and the note"
http POST "$ONE" -F job_id="$WIDE" -F image_path="$IMG"
page
check '[ "$CODE" = 200 ] && [ "$(pj "d[\"note\"]")" = "$NOTE" ] && [ "$(pj "len(d[\"items\"])")" = 3 ]' \
    "the classify_one page shows the note"
http POST "$MANY/json" -F job_id="$WIDE" -F image_list="@$T/list.txt"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"note\"]")" = "$NOTE" ]' "classify_many/json carries the note"
http POST "$MANY" -F job_id="$WIDE" -F image_list="@$T/list.txt"
page
check '[ "$CODE" = 200 ] && [ "$(pj "d[\"note\"]")" = "$NOTE" ]' "the classify_many page shows the note"
http POST "$TOPN/json" -F job_id="$WIDE" -F image_list="@$T/list.txt"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"note\"]")" = "$NOTE" ]' "top_n/json carries the note"
http POST "$TOPN" -F job_id="$WIDE" -F image_list="@$T/list.txt"
page
check '[ "$CODE" = 200 ] && [ "$(pj "d[\"note\"]")" = "$NOTE" ]' "the top_n page shows the note"

finish
