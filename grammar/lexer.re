/* lexer.re: the tokens of a .spmd file (SPEC section 2), for re2c.
 * lex_next() returns one token with its span; lexical errors are reported
 * and skipped so the parser always sees a well-formed token stream. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lexer.h"
#include "parser.h"

static Span tok_span(Lexer *lx) {
  return (Span){(uint32_t)lx->file, (uint32_t)(lx->tok - lx->start),
                (uint32_t)(lx->cur - lx->start)};
}

static Span span_at(Lexer *lx, const char *from, const char *to) {
  return (Span){(uint32_t)lx->file, (uint32_t)(from - lx->start), (uint32_t)(to - lx->start)};
}

/* Brackets are tracked so that a syntax error at a closer or at the end of
 * the file can name the bracket that is still open. */
static void bracket_open(Lexer *lx, char ch) {
  if (lx->nopen < MAX_BRACKETS) {
    lx->open[lx->nopen].ch = ch;
    lx->open[lx->nopen].span = tok_span(lx);
  }
  lx->nopen++;
}

static void bracket_close(Lexer *lx, char ch) {
  static const char pair[] = {['('] = ')', ['['] = ']', ['{'] = '}'};
  if (lx->nopen == 0)
    return;
  if (lx->nopen > MAX_BRACKETS || pair[(unsigned char)lx->open[lx->nopen - 1].ch] == ch)
    lx->nopen--;
}

/* The "*" "/" that ends a block comment opened before p, or NULL. */
static const char *comment_end(Lexer *lx, const char *p) {
  for (; p + 1 < lx->lim; p++)
    if (p[0] == '*' && p[1] == '/')
      return p;
  return NULL;
}

/* Skips whitespace and comments from p without reporting anything. */
static const char *skip_blank(Lexer *lx, const char *p) {
  for (;;) {
    while (p < lx->lim && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
      p++;
    if (p + 1 < lx->lim && p[0] == '/' && p[1] == '/') {
      while (p < lx->lim && *p != '\n')
        p++;
    } else if (p + 1 < lx->lim && p[0] == '/' && p[1] == '*') {
      const char *end = comment_end(lx, p + 2);
      p = end ? end + 2 : lx->lim;
    } else {
      return p;
    }
  }
}

static bool is_ident_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_';
}

/* A '{' opens the axis entries of a type when it is followed by `name :` or
 * `* :`; no statement can start that way, so the parser needs no second
 * token of lookahead to tell `-> f32[4] {tp: R} {` from `-> f32[4] {`. */
static bool opens_entries(Lexer *lx) {
  const char *p = skip_blank(lx, lx->cur);
  if (p < lx->lim && *p == '*') {
    p++;
  } else {
    const char *q = p;
    while (p < lx->lim && is_ident_char(*p))
      p++;
    if (p == q)
      return false;
  }
  p = skip_blank(lx, p);
  return p < lx->lim && *p == ':';
}

static int lex_string(Lexer *lx, YYSTYPE *lval) {
  Compiler *c = lx->c;
  StrBuf sb;
  sb_init(&sb, &c->arena);
  const char *p = lx->tok + 1;
  for (;;) {
    if (p >= lx->lim || *p == '\n') {
      lx->cur = p;
      error_at(c, span_at(lx, lx->tok, lx->tok + 1), "missing closing '\"' of this string");
      break;
    }
    if (*p == '"') {
      lx->cur = p + 1;
      break;
    }
    if (*p != '\\') {
      sb_putc(&sb, *p++);
      continue;
    }
    char esc = p + 1 < lx->lim ? p[1] : '\0';
    switch (esc) {
    case 'n': sb_putc(&sb, '\n'); break;
    case 't': sb_putc(&sb, '\t'); break;
    case '\\': sb_putc(&sb, '\\'); break;
    case '"': sb_putc(&sb, '"'); break;
    default:
      error_at(c, span_at(lx, p, p + (p + 1 < lx->lim ? 2 : 1)),
               "unknown escape sequence in string");
      help(c, "the escapes are \\\" \\\\ \\n and \\t");
      if (esc == '\n' || esc == '\0') {
        p++;
        continue;
      }
    }
    p += 2;
  }
  lval->str.s = sb.data;
  lval->str.len = sb.len;
  return STRING;
}

static int lex_int(Lexer *lx, YYSTYPE *lval) {
  errno = 0;
  char *end;
  long long v = strtoll(lx->tok, &end, 10);
  if (errno == ERANGE || v > (1LL << 53)) {
    error_at(lx->c, tok_span(lx), "integer literal is too large");
    help(lx->c, "integers in .spmd files are at most 2^53 (9007199254740992)");
    v = 0;
  }
  lval->ival = v;
  return INT;
}

static int lex_float(Lexer *lx, YYSTYPE *lval) {
  errno = 0;
  double v = strtod(lx->tok, NULL);
  if (errno == ERANGE && (v > 1.0 || v < -1.0)) {
    error_at(lx->c, tok_span(lx), "number literal is too large for f64");
    v = 0;
  }
  lval->fval = v;
  return FLOAT;
}

/*!re2c
  re2c:define:YYCTYPE = char;
  re2c:define:YYCURSOR = lx->cur;
  re2c:define:YYLIMIT = lx->lim;
  re2c:define:YYMARKER = marker;
  re2c:yyfill:enable = 0;
  re2c:eof = 0;

  digit = [0-9];
  ident = [A-Za-z_][A-Za-z0-9_]*;
  exp   = [eE] [+-]? digit+;
*/

int yylex(YYSTYPE *lval, Span *lloc, Lexer *lx) {
  const char *marker = lx->cur;
  for (;;) {
    lx->tok = lx->cur;
    int t = -1;
    /*!re2c
      $                 { *lloc = tok_span(lx); return YYEOF; }
      [ \t\r\n]+        { continue; }
      "//" [^\n]*       { continue; }
      "/*"              {
                          const char *end = comment_end(lx, lx->cur);
                          if (!end) {
                            error_at(lx->c, tok_span(lx), "this comment is never closed");
                            help(lx->c, "end it with */");
                            lx->cur = lx->lim;
                          } else {
                            lx->cur = end + 2;
                          }
                          continue;
                        }

      "mesh"      { t = MESH; goto done; }
      "const"     { t = CONST; goto done; }
      "fn"        { t = FN; goto done; }
      "local"     { t = LOCAL; goto done; }
      "export"    { t = EXPORT; goto done; }
      "let"       { t = LET; goto done; }
      "var"       { t = VAR; goto done; }
      "return"    { t = RETURN; goto done; }
      "for"       { t = FOR; goto done; }
      "in"        { t = IN; goto done; }
      "if"        { t = IF; goto done; }
      "else"      { t = ELSE; goto done; }
      "import"    { t = IMPORT; goto done; }
      "axis"      { t = AXIS; goto done; }
      "local_map" { t = LOCAL_MAP; goto done; }
      "over"      { t = OVER; goto done; }
      "true"      { lval->ival = 1; t = TRUE; goto done; }
      "false"     { lval->ival = 0; t = FALSE; goto done; }
      "f32"       { lval->dtype = DT_F32; t = DTYPE; goto done; }
      "f64"       { lval->dtype = DT_F64; t = DTYPE; goto done; }
      "i32"       { lval->dtype = DT_I32; t = DTYPE; goto done; }
      "R"         { lval->ltype = LT_R; t = LTYPE; goto done; }
      "I"         { lval->ltype = LT_I; t = LTYPE; goto done; }
      "V"         { lval->ltype = LT_V; t = LTYPE; goto done; }
      "P"         { lval->ltype = LT_P; t = LTYPE; goto done; }
      "S"         { t = SHARD; goto done; }
      ident       { lval->name = intern(lx->c, lx->tok, (size_t)(lx->cur - lx->tok)); t = IDENT; goto done; }

      digit+                                      { t = lex_int(lx, lval); goto done; }
      digit+ "." digit+ exp? | digit+ exp         { t = lex_float(lx, lval); goto done; }
      digit+ ident                                {
                                                    error_at(lx->c, tok_span(lx), "invalid number '%.*s'",
                                                             (int)(lx->cur - lx->tok), lx->tok);
                                                    lval->ival = 0; t = INT; goto done;
                                                  }
      ["]         { t = lex_string(lx, lval); goto done; }

      "=="  { t = EQ; goto done; }
      "!="  { t = NE; goto done; }
      "<="  { t = LE; goto done; }
      ">="  { t = GE; goto done; }
      "&&"  { t = ANDAND; goto done; }
      "||"  { t = OROR; goto done; }
      "->"  { t = ARROW; goto done; }
      ".."  { t = DOTDOT; goto done; }
      "{"   { bracket_open(lx, '{'); t = opens_entries(lx) ? TYPE_LBRACE : '{'; goto done; }
      "(" | "["  { bracket_open(lx, lx->tok[0]); t = lx->tok[0]; goto done; }
      ")" | "]" | "}"  { bracket_close(lx, lx->tok[0]); t = lx->tok[0]; goto done; }
      [,;:=+\-*/%@<>!.] { t = lx->tok[0]; goto done; }

      *     {
              unsigned char ch = (unsigned char)lx->tok[0];
              if (ch >= 0x20 && ch < 0x7f)
                error_at(lx->c, tok_span(lx), "unexpected character '%c'", ch);
              else
                error_at(lx->c, tok_span(lx), "unexpected byte 0x%02x (is this a .spmd text file?)", ch);
              continue;
            }
    */
  done:
    *lloc = tok_span(lx);
    lx->prev = lx->last;
    lx->last = *lloc;
    return t;
  }
}
