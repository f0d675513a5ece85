/* parser.y: the grammar of .spmd files (SPEC sections 2-4, 6-11), for Bison.
 * A pure, reentrant LALR(1) parser with locations.  Actions only build AST
 * nodes; every semantic rule lives in a later phase.  Syntax errors are
 * reported in words (yyreport_syntax_error below) and the parser recovers at
 * `;`, `}` and declaration boundaries so that one run reports them all. */

%define api.pure full
%define api.location.type {Span}
%define parse.error custom
%define parse.lac full
%locations
%expect 0
%param {Lexer *lx}

%code requires {
#include "lexer.h"

#define YYLLOC_DEFAULT(Cur, Rhs, N)                                            \
  do {                                                                         \
    if (N) {                                                                   \
      int first_ = 1; /* an empty leading part (fn_flags) has no extent */     \
      while (first_ < (N) && YYRHSLOC(Rhs, first_).begin == YYRHSLOC(Rhs, first_).end) \
        first_++;                                                              \
      (Cur) = YYRHSLOC(Rhs, first_);                                           \
      (Cur).end = YYRHSLOC(Rhs, N).end;                                        \
    } else {                                                                   \
      (Cur) = YYRHSLOC(Rhs, 0);                                                \
      (Cur).begin = (Cur).end;                                                 \
    }                                                                          \
  } while (0)

/* Lists under construction: head and tail, so appending is O(1). */
#define LIST_TYPE(T) struct { T *head, *tail; }
}

%union {
  long long ival;
  double fval;
  struct { const char *s; size_t len; } str;
  Name name;
  DType dtype;
  LTypeKind ltype;
  LType lt;
  int flags;
  Expr *expr;
  Arg *arg;
  Stmt *stmt;
  TypeExpr *type;
  struct { TypeExpr *t; bool tuple; } ret;
  Dim *dim;
  AxisRef *axis;
  AxisEntry *entry;
  Param *param;
  Binding *bind;
  MeshAxisDecl *maxis;
  LIST_TYPE(Expr) exprs;
  LIST_TYPE(Arg) args;
  LIST_TYPE(Stmt) stmts;
  LIST_TYPE(TypeExpr) types;
  LIST_TYPE(Dim) dims;
  LIST_TYPE(AxisRef) axes;
  LIST_TYPE(AxisEntry) entries;
  LIST_TYPE(Param) params;
  LIST_TYPE(Binding) binds;
  LIST_TYPE(MeshAxisDecl) maxes;
}

%code {
#include <string.h>

int yylex(YYSTYPE *lval, Span *lloc, Lexer *lx);

static void yyerror(Span *loc, Lexer *lx, const char *msg);

#define LIST_EMPTY(l) ((l).head = (l).tail = NULL)
#define LIST_ONE(l, n) ((l).head = (l).tail = (n))
/* dst = src + n; n may be NULL (a statement that failed to parse). */
#define LIST_ADD(dst, src, n)                                                  \
  do {                                                                         \
    (dst) = (src);                                                             \
    if (!(n))                                                                  \
      break;                                                                   \
    if ((dst).tail)                                                            \
      (dst).tail = (dst).tail->next = (n);                                     \
    else                                                                       \
      (dst).head = (dst).tail = (n);                                           \
  } while (0)

#define C (lx->c)
#define NEW(T) ((T *)arena_alloc(&C->arena, sizeof(T)))

static void add_item(Lexer *lx, Item *it);
static Item *new_item(Lexer *lx, ItemKind kind, Span sp);
static Stmt *new_stmt(Lexer *lx, StmtKind kind, Span sp);
static AxisRef *new_axis(Lexer *lx, Name name, Span sp);
static Binding *new_binding(Lexer *lx, Name name, Span sp);
static Expr *new_call(Lexer *lx, Expr *callee, Arg *args, Span sp);
static Expr *new_postfix(Lexer *lx, ExprKind kind, Expr *lhs, Expr *rhs, Span sp);
static Expr *new_seq(Lexer *lx, ExprKind kind, Expr *elems, Span sp);
}

%token <ival> INT "integer" TRUE "true" FALSE "false"
%token <fval> FLOAT "number"
%token <str> STRING "string"
%token <name> IDENT "identifier"
%token <dtype> DTYPE "dtype"
%token <ltype> LTYPE "type letter"
%token SHARD "S"
%token MESH "mesh" CONST "const" FN "fn" LOCAL "local" EXPORT "export"
%token LET "let" VAR "var" RETURN "return" FOR "for" IN "in" IF "if"
%token ELSE "else" IMPORT "import" AXIS "axis" LOCAL_MAP "local_map"
%token OVER "over"
%token EQ "==" NE "!=" LE "<=" GE ">=" ANDAND "&&" OROR "||"
%token ARROW "->" DOTDOT ".."
%token TYPE_LBRACE "{ (of axis types)"

%type <expr> expr postfix primary size ltype_expr local_map arg_value
%type <exprs> expr_list expr_list_opt
%type <arg> arg
%type <args> args args_opt
%type <stmt> stmt block if_stmt
%type <stmts> stmts
%type <type> type
%type <ret> fn_ret
%type <types> type_list
%type <dim> dim
%type <dims> dims dims_opt
%type <axis> axis_name
%type <axes> axis_names axis_group over_opt
%type <entry> entry
%type <entries> entries entries_opt
%type <lt> ltype
%type <param> param
%type <params> params params_opt
%type <bind> binding
%type <binds> bindings
%type <maxis> mesh_axis
%type <maxes> mesh_axes
%type <flags> fn_flags

%left OROR
%left ANDAND
%left EQ NE
%left '<' '>' LE GE
%left '+' '-'
%left '*' '/' '%' '@'
%precedence UNARY

%%

/* program: item* */
program
  : %empty
  | program item
  ;

/* item: import | mesh | const | fn */
item
  : IMPORT IDENT ';'                   { Item *it = new_item(lx, IT_IMPORT, @$); it->name = $2; it->name_span = @2; add_item(lx, it); }
  | MESH '(' mesh_axes ')' ';'         { Item *it = new_item(lx, IT_MESH, @$); it->axes = $3.head; add_item(lx, it); }
  | CONST IDENT '=' expr ';'           { Item *it = new_item(lx, IT_CONST, @$); it->name = $2; it->name_span = @2; it->value = $4; add_item(lx, it); }
  | fn_flags FN IDENT '(' params_opt ')' fn_ret block
      {
        Item *it = new_item(lx, IT_FN, @$);
        FnDecl *fn = it->fn = NEW(FnDecl);
        fn->span = span_join(@$, @7); fn->span.end = @7.end > @6.end ? @7.end : @6.end; fn->name = $3; fn->name_span = @3; fn->flags = $1;
        fn->params = $5.head; fn->ret = $7.t; fn->ret_tuple = $7.tuple; fn->body = $8;
        add_item(lx, it);
      }
  | error ';'
  | error '}'
  ;

fn_flags
  : %empty        { $$ = 0; }
  | LOCAL         { $$ = FN_LOCAL; }
  | EXPORT        { $$ = FN_EXPORT; }
  | EXPORT LOCAL  { $$ = FN_EXPORT | FN_LOCAL; }
  ;

/* mesh_axis: name [':' size] */
mesh_axes
  : mesh_axis                  { LIST_ONE($$, $1); }
  | mesh_axes ',' mesh_axis    { LIST_ADD($$, $1, $3); }
  ;
mesh_axis
  : IDENT           { $$ = NEW(MeshAxisDecl); $$->span = @$; $$->name = $1; }
  | IDENT ':' expr  { $$ = NEW(MeshAxisDecl); $$->span = @$; $$->name = $1; $$->size = $3; }
  ;

params_opt
  : %empty        { LIST_EMPTY($$); }
  | params        { $$ = $1; }
  | params ','    { $$ = $1; }
  ;
params
  : param              { LIST_ONE($$, $1); }
  | params ',' param   { LIST_ADD($$, $1, $3); }
  ;
/* param: name ':' type | name ':' 'axis' */
param
  : IDENT ':' type  { $$ = NEW(Param); $$->span = @$; $$->name = new_binding(lx, $1, @1); $$->type = $3; }
  | IDENT ':' AXIS
      {
        $$ = NEW(Param); $$->span = @$; $$->name = new_binding(lx, $1, @1);
        $$->type = NEW(TypeExpr); $$->type->span = @3; $$->type->is_axis = true;
      }
  ;

/* fn_ret: ['->' type | '->' '(' type, ... ')'] */
fn_ret
  : %empty                  { $$.t = NULL; $$.tuple = false; }
  | ARROW type              { $$.t = $2; $$.tuple = false; }
  | ARROW '(' type_list ')' { $$.t = $3.head; $$.tuple = true; }
  ;
type_list
  : type                    { LIST_ONE($$, $1); }
  | type_list ',' type      { LIST_ADD($$, $1, $3); }
  ;

/* type: dtype ['[' dim, ... ']'] ['{' entry, ... '}'] */
type
  : DTYPE dims_opt entries_opt
      {
        $$ = NEW(TypeExpr); $$->span = @$; $$->dtype = $1;
        $$->has_dims = @2.end > @2.begin; $$->dims = $2.head; $$->entries = $3.head;
      }
  ;
dims_opt
  : %empty             { LIST_EMPTY($$); }
  | '[' ']'            { LIST_EMPTY($$); }
  | '[' dims ']'       { $$ = $2; }
  | '[' dims ',' ']'   { $$ = $2; }
  ;
dims
  : dim             { LIST_ONE($$, $1); }
  | dims ',' dim    { LIST_ADD($$, $1, $3); }
  ;
/* dim: size ['@' axes] | '..' name */
dim
  : size                    { $$ = NEW(Dim); $$->span = @$; $$->size = $1; }
  | size '@' axis_group     { $$ = NEW(Dim); $$->span = @$; $$->size = $1; $$->axes = $3.head; }
  | DOTDOT IDENT
      {
        $$ = NEW(Dim); $$->span = @$; $$->rest = true;
        $$->size = ast_expr(C, EX_NAME, @2); $$->size->name = $2;
      }
  ;
/* size: int | name | size '*' size | size '/' size | size '+' size | size '-' size | '(' size ')' */
size
  : INT              { $$ = ast_expr(C, EX_INT, @$); $$->ival = $1; }
  | IDENT            { $$ = ast_expr(C, EX_NAME, @$); $$->name = $1; }
  | size '*' size    { $$ = ast_binary(C, OP_MUL, $1, $3, @$); }
  | size '/' size    { $$ = ast_binary(C, OP_DIV, $1, $3, @$); }
  | size '+' size    { $$ = ast_binary(C, OP_ADD, $1, $3, @$); }
  | size '-' size    { $$ = ast_binary(C, OP_SUB, $1, $3, @$); }
  | '(' size ')'     { $$ = $2; $$->span = @$; }
  ;
axis_group
  : axis_name                   { LIST_ONE($$, $1); }
  | '(' axis_names ')'          { $$ = $2; }
  ;
axis_names
  : axis_name                   { LIST_ONE($$, $1); }
  | axis_names ',' axis_name    { LIST_ADD($$, $1, $3); }
  ;
axis_name
  : IDENT                       { $$ = new_axis(lx, $1, @1); }
  ;
entries_opt
  : %empty                          { LIST_EMPTY($$); }
  | TYPE_LBRACE entries '}'         { $$ = $2; }
  | TYPE_LBRACE entries ',' '}'     { $$ = $2; }
  ;
entries
  : entry                  { LIST_ONE($$, $1); }
  | entries ',' entry      { LIST_ADD($$, $1, $3); }
  ;
/* entry: axis ':' ltype | '*' ':' ltype */
entry
  : IDENT ':' ltype   { $$ = NEW(AxisEntry); $$->span = @$; $$->axis = new_axis(lx, $1, @1); $$->lt = $3; }
  | '*' ':' ltype     { $$ = NEW(AxisEntry); $$->span = @$; $$->lt = $3; }
  ;
/* ltype: R | I | V | P | S '(' int ')' */
ltype
  : LTYPE                    { $$ = (LType){$1, 0}; }
  | SHARD '(' INT ')'        { $$ = (LType){LT_S, (int)($3 > 1000 ? 1000 : $3)}; }
  | SHARD '(' '-' INT ')'    { $$ = (LType){LT_S, (int)($4 > 1000 ? -1000 : -$4)}; }
  ;

/* block: '{' stmt* '}' */
block
  : '{' stmts '}'          { $$ = new_stmt(lx, ST_BLOCK, @$); $$->body = $2.head; }
  | '{' stmts error '}'    { $$ = new_stmt(lx, ST_BLOCK, @$); $$->body = $2.head; }
  ;
stmts
  : %empty           { LIST_EMPTY($$); }
  | stmts stmt       { LIST_ADD($$, $1, $2); }
  ;

stmt
  : LET bindings '=' expr ';'
      { $$ = new_stmt(lx, ST_LET, @$); $$->targets = $2.head; $$->value = $4; }
  | LET binding ':' type '=' expr ';'
      { $$ = new_stmt(lx, ST_LET, @$); $$->targets = $2; $$->type = $4; $$->value = $6; }
  | VAR binding '=' expr ';'
      { $$ = new_stmt(lx, ST_VAR, @$); $$->targets = $2; $$->value = $4; }
  | VAR binding ':' type '=' expr ';'
      { $$ = new_stmt(lx, ST_VAR, @$); $$->targets = $2; $$->type = $4; $$->value = $6; }
  | IDENT '=' expr ';'
      { $$ = new_stmt(lx, ST_ASSIGN, @$); $$->targets = new_binding(lx, $1, @1); $$->value = $3; }
  | RETURN ';'
      { $$ = new_stmt(lx, ST_RETURN, @$); }
  | RETURN expr_list ';'
      { $$ = new_stmt(lx, ST_RETURN, @$); $$->value = $2.head; }
  | FOR binding IN expr DOTDOT expr block
      { $$ = new_stmt(lx, ST_FOR, @$); $$->targets = $2; $$->lo = $4; $$->hi = $6; $$->then = $7; }
  | if_stmt
  | expr ';'
      { $$ = new_stmt(lx, ST_EXPR, @$); $$->value = $1; }
  | error ';'
      { $$ = NULL; }
  ;
if_stmt
  : IF expr block                  { $$ = new_stmt(lx, ST_IF, @$); $$->cond = $2; $$->then = $3; }
  | IF expr block ELSE block       { $$ = new_stmt(lx, ST_IF, @$); $$->cond = $2; $$->then = $3; $$->els = $5; }
  | IF expr block ELSE if_stmt     { $$ = new_stmt(lx, ST_IF, @$); $$->cond = $2; $$->then = $3; $$->els = $5; }
  ;
bindings
  : binding                  { LIST_ONE($$, $1); }
  | bindings ',' binding     { LIST_ADD($$, $1, $3); }
  ;
binding
  : IDENT                    { $$ = new_binding(lx, $1, @1); }
  ;

expr
  : expr OROR expr      { $$ = ast_binary(C, OP_OR, $1, $3, @$); }
  | expr ANDAND expr    { $$ = ast_binary(C, OP_AND, $1, $3, @$); }
  | expr EQ expr        { $$ = ast_binary(C, OP_EQ, $1, $3, @$); }
  | expr NE expr        { $$ = ast_binary(C, OP_NE, $1, $3, @$); }
  | expr '<' expr       { $$ = ast_binary(C, OP_LT, $1, $3, @$); }
  | expr LE expr        { $$ = ast_binary(C, OP_LE, $1, $3, @$); }
  | expr '>' expr       { $$ = ast_binary(C, OP_GT, $1, $3, @$); }
  | expr GE expr        { $$ = ast_binary(C, OP_GE, $1, $3, @$); }
  | expr '+' expr       { $$ = ast_binary(C, OP_ADD, $1, $3, @$); }
  | expr '-' expr       { $$ = ast_binary(C, OP_SUB, $1, $3, @$); }
  | expr '*' expr       { $$ = ast_binary(C, OP_MUL, $1, $3, @$); }
  | expr '/' expr       { $$ = ast_binary(C, OP_DIV, $1, $3, @$); }
  | expr '%' expr       { $$ = ast_binary(C, OP_MOD, $1, $3, @$); }
  | expr '@' expr       { $$ = ast_binary(C, OP_MATMUL, $1, $3, @$); }
  | '-' expr %prec UNARY  { $$ = ast_unary(C, OP_NEG, $2, @$); }
  | '!' expr %prec UNARY  { $$ = ast_unary(C, OP_NOT, $2, @$); }
  | postfix
  | type                { $$ = ast_expr(C, EX_TYPE, @$); $$->type = $1; }
  ;
postfix
  : primary
  | postfix '(' args_opt ')'    { $$ = new_call(lx, $1, $3.head, @$); }
  | postfix '[' expr ']'        { $$ = new_postfix(lx, EX_INDEX, $1, $3, @$); }
  | postfix '.' IDENT           { $$ = new_postfix(lx, EX_FIELD, $1, NULL, @$); $$->name = $3; }
  ;
primary
  : INT                 { $$ = ast_expr(C, EX_INT, @$); $$->ival = $1; }
  | FLOAT               { $$ = ast_expr(C, EX_FLOAT, @$); $$->fval = $1; }
  | STRING              { $$ = ast_expr(C, EX_STRING, @$); $$->str = $1.s; $$->slen = $1.len; }
  | TRUE                { $$ = ast_expr(C, EX_BOOL, @$); $$->ival = 1; }
  | FALSE               { $$ = ast_expr(C, EX_BOOL, @$); $$->ival = 0; }
  | IDENT               { $$ = ast_expr(C, EX_NAME, @$); $$->name = $1; }
  | ltype_expr
  | '(' expr ')'                          { $$ = $2; }
  | '(' ')'                               { $$ = new_seq(lx, EX_TUPLE, NULL, @$); }
  | '(' expr ',' expr_list_opt ')'        { $2->next = $4.head; $$ = new_seq(lx, EX_TUPLE, $2, @$); }
  | '[' expr_list_opt ']'                 { $$ = new_seq(lx, EX_LIST, $2.head, @$); }
  | local_map
  ;
/* The letters R I V P and S(dim) as values, for src=, dst= and the like. */
ltype_expr
  : LTYPE                 { $$ = ast_expr(C, EX_LTYPE, @$); $$->lt.kind = $1; }
  | SHARD '(' expr ')'    { $$ = ast_expr(C, EX_LTYPE, @$); $$->lt.kind = LT_S; $$->lhs = $3; $$->depth = $3->depth + 1; }
  ;
/* local_map: 'local_map' '(' names ')' ['over' axes] block */
local_map
  : LOCAL_MAP '(' axis_names ')' over_opt block
      {
        $$ = ast_expr(C, EX_LOCAL_MAP, @$); $$->lm_vars = $3.head;
        $$->lm_over = $5.head; $$->lm_has_over = @5.end > @5.begin; $$->body = $6;
      }
  ;
over_opt
  : %empty                  { LIST_EMPTY($$); }
  | OVER axis_group         { $$ = $2; }
  ;
expr_list_opt
  : %empty                  { LIST_EMPTY($$); }
  | expr_list               { $$ = $1; }
  | expr_list ','           { $$ = $1; }
  ;
expr_list
  : expr                    { LIST_ONE($$, $1); }
  | expr_list ',' expr      { LIST_ADD($$, $1, $3); }
  ;
args_opt
  : %empty            { LIST_EMPTY($$); }
  | args              { $$ = $1; }
  | args ','          { $$ = $1; }
  ;
args
  : arg               { LIST_ONE($$, $1); }
  | args ',' arg      { LIST_ADD($$, $1, $3); }
  ;
/* arg: expr | name '=' expr */
arg
  : arg_value          { $$ = NEW(Arg); $$->span = @$; $$->value = $1; }
  | IDENT '=' expr     { $$ = NEW(Arg); $$->span = @$; $$->name = $1; $$->name_span = @1; $$->value = $3; }
  ;
arg_value
  : expr
  ;

%%

static Item *new_item(Lexer *lx, ItemKind kind, Span sp) {
  Item *it = NEW(Item);
  it->kind = kind;
  it->span = sp;
  return it;
}

static void add_item(Lexer *lx, Item *it) {
  if (lx->items_tail)
    lx->items_tail->next = it;
  else
    lx->module->items = it;
  lx->items_tail = it;
}

static Stmt *new_stmt(Lexer *lx, StmtKind kind, Span sp) {
  Stmt *s = NEW(Stmt);
  s->kind = kind;
  s->span = sp;
  return s;
}

static AxisRef *new_axis(Lexer *lx, Name name, Span sp) {
  AxisRef *a = NEW(AxisRef);
  a->name = name;
  a->span = sp;
  return a;
}

static Binding *new_binding(Lexer *lx, Name name, Span sp) {
  Binding *b = NEW(Binding);
  b->name = name;
  b->span = sp;
  return b;
}

static Expr *new_call(Lexer *lx, Expr *callee, Arg *args, Span sp) {
  Expr *e = ast_expr(C, EX_CALL, sp);
  e->lhs = callee;
  e->args = args;
  e->depth = callee->depth;
  for (Arg *a = args; a; a = a->next)
    if (a->value->depth > e->depth)
      e->depth = a->value->depth;
  e->depth++;
  return ast_bound(C, e);
}

static Expr *new_postfix(Lexer *lx, ExprKind kind, Expr *lhs, Expr *rhs, Span sp) {
  Expr *e = ast_expr(C, kind, sp);
  e->lhs = lhs;
  e->rhs = rhs;
  e->depth = 1 + (rhs && rhs->depth > lhs->depth ? rhs->depth : lhs->depth);
  return ast_bound(C, e);
}

static Expr *new_seq(Lexer *lx, ExprKind kind, Expr *elems, Span sp) {
  Expr *e = ast_expr(C, kind, sp);
  e->elems = elems;
  for (Expr *x = elems; x; x = x->next)
    if (x->depth > e->depth)
      e->depth = x->depth;
  e->depth++;
  return ast_bound(C, e);
}

/* ---- syntax errors in words ---- */

/* Whether k is the character token ch, as in '(' */
static bool is_char(yysymbol_kind_t k, char ch) {
  const char *name = yysymbol_name(k);
  return name[0] == '\'' && name[1] == ch && name[2] == '\'';
}

static bool expects_char(const yysymbol_kind_t *exp, int n, char ch) {
  for (int i = 0; i < n; i++)
    if (is_char(exp[i], ch))
      return true;
  return false;
}

static bool expects(const yysymbol_kind_t *exp, int n, yysymbol_kind_t k) {
  for (int i = 0; i < n; i++)
    if (exp[i] == k)
      return true;
  return false;
}

/* What the user sees for a token the parser did not expect. */
static const char *describe_found(Lexer *lx, yysymbol_kind_t k, Span sp) {
  const char *text = lx->start + sp.begin;
  int len = (int)(sp.end - sp.begin);
  if (len > 40)
    len = 40;
  switch (k) {
  case YYSYMBOL_YYEOF: return "end of file";
  case YYSYMBOL_IDENT: return arena_sprintf(&C->arena, "name '%.*s'", len, text);
  case YYSYMBOL_INT:
  case YYSYMBOL_FLOAT: return arena_sprintf(&C->arena, "number %.*s", len, text);
  case YYSYMBOL_STRING: return "a string";
  case YYSYMBOL_DTYPE: return arena_sprintf(&C->arena, "type '%.*s'", len, text);
  case YYSYMBOL_TRUE:
  case YYSYMBOL_FALSE:
  case YYSYMBOL_LTYPE:
  case YYSYMBOL_SHARD: return arena_sprintf(&C->arena, "'%.*s'", len, text);
  default:
    if (k >= YYSYMBOL_MESH && k <= YYSYMBOL_OVER)
      return arena_sprintf(&C->arena, "keyword '%.*s'", len, text);
    return arena_sprintf(&C->arena, "'%.*s'", len, text);
  }
}

/* Tokens that can start an expression, and operators that can follow one:
 * an expected set holding these is summarised in words. */
static const yysymbol_kind_t expr_start[] = {
    YYSYMBOL_INT, YYSYMBOL_FLOAT, YYSYMBOL_STRING, YYSYMBOL_TRUE, YYSYMBOL_FALSE,
    YYSYMBOL_IDENT, YYSYMBOL_LTYPE, YYSYMBOL_SHARD, YYSYMBOL_LOCAL_MAP, YYSYMBOL_DTYPE};
static const char *const operators = "+-*/%@<>.([";

static const char *expected_words(Lexer *lx, const yysymbol_kind_t *exp, int n) {
  const char *words[YYNTOKENS];
  int nw = 0;
  bool stmt = expects(exp, n, YYSYMBOL_LET) && expects(exp, n, YYSYMBOL_RETURN);
  bool decl = expects(exp, n, YYSYMBOL_FN) && expects(exp, n, YYSYMBOL_MESH);
  bool expr = expects(exp, n, YYSYMBOL_INT) && expects(exp, n, YYSYMBOL_IDENT);
  bool after_expr = expects(exp, n, YYSYMBOL_OROR);
  if (decl)
    words[nw++] = "a declaration (fn, mesh, const or import)";
  else if (stmt)
    words[nw++] = "a statement";
  else if (expr)
    words[nw++] = "an expression";
  for (int i = 0; i < n; i++) {
    yysymbol_kind_t k = exp[i];
    const char *name = yysymbol_name(k);
    bool is_start = false;
    for (size_t j = 0; j < sizeof expr_start / sizeof expr_start[0]; j++)
      is_start |= expr_start[j] == k;
    if (k == YYSYMBOL_YYEOF && decl)
      continue;
    if ((decl || stmt) && (k == YYSYMBOL_LET || k == YYSYMBOL_VAR || k == YYSYMBOL_RETURN ||
                           k == YYSYMBOL_FOR || k == YYSYMBOL_IF || k == YYSYMBOL_FN ||
                           k == YYSYMBOL_MESH || k == YYSYMBOL_CONST || k == YYSYMBOL_IMPORT ||
                           k == YYSYMBOL_LOCAL || k == YYSYMBOL_EXPORT || k == YYSYMBOL_YYerror))
      continue;
    if ((expr || stmt) && (is_start || is_char(k, '-') || is_char(k, '!') || is_char(k, '(') ||
                           is_char(k, '[')))
      continue;
    if (after_expr && ((name[0] == '\'' && name[1] && strchr(operators, name[1])) ||
                       k == YYSYMBOL_OROR || k == YYSYMBOL_ANDAND || k == YYSYMBOL_EQ ||
                       k == YYSYMBOL_NE || k == YYSYMBOL_LE || k == YYSYMBOL_GE))
      continue;
    if (k == YYSYMBOL_YYerror || k == YYSYMBOL_TYPE_LBRACE)
      continue;
    if (k == YYSYMBOL_IDENT)
      words[nw++] = "a name";
    else if (k == YYSYMBOL_INT)
      words[nw++] = "an integer";
    else if (k == YYSYMBOL_DTYPE)
      words[nw++] = "a type (f32, f64 or i32)";
    else if (k == YYSYMBOL_LTYPE)
      words[nw++] = "R, I, V, P";
    else if (k == YYSYMBOL_SHARD)
      words[nw++] = "S(dim)";
    else if (k == YYSYMBOL_YYEOF)
      words[nw++] = "end of file";
    else if (name[0] == '"' || name[0] == '\'')
      words[nw++] = arena_sprintf(&C->arena, "'%.*s'", (int)strlen(name) - 2, name + 1);
    else
      words[nw++] = name;
  }
  if (nw == 0 || nw > 5)
    return NULL;
  StrBuf sb;
  sb_init(&sb, &C->arena);
  for (int i = 0; i < nw; i++) {
    if (i > 0)
      sb_puts(&sb, i == nw - 1 ? " or " : ", ");
    sb_puts(&sb, words[i]);
  }
  return sb.data;
}

/* The bracket a closer in the expected set would close, if any. */
static int open_bracket(Lexer *lx, yysymbol_kind_t found, const yysymbol_kind_t *exp, int n) {
  int top = lx->nopen - 1;
  if (is_char(found, '(') || is_char(found, '[') || is_char(found, '{') ||
      found == YYSYMBOL_TYPE_LBRACE)
    top--; /* the found token is itself an opener */
  if (top < 0 || top >= MAX_BRACKETS)
    return -1;
  char ch = lx->open[top].ch;
  return expects_char(exp, n, ch == '(' ? ')' : ch == '[' ? ']' : '}') ? top : -1;
}

static int yyreport_syntax_error(const yypcontext_t *ctx, Lexer *lx) {
  enum { NEXP = YYNTOKENS };
  yysymbol_kind_t exp[NEXP];
  int n = yypcontext_expected_tokens(ctx, exp, NEXP);
  if (n < 0)
    n = 0;
  yysymbol_kind_t found = yypcontext_token(ctx);
  Span at = *yypcontext_location(ctx);
  if (at.file == lx->last_error.file && at.begin == lx->last_error.begin && lx->last_error.file)
    return 0;
  lx->last_error = at;
  const char *want = expected_words(lx, exp, n);
  const char *what = describe_found(lx, found, at);
  int prev_line, prev_col, at_line, at_col;
  Span prev = lx->prev;
  prev.begin = prev.end > prev.begin ? prev.end - 1 : prev.begin;
  source_position(C, prev, &prev_line, &prev_col);
  source_position(C, at, &at_line, &at_col);
  if (want && prev.file && prev_line < at_line) {
    /* What is missing belongs at the end of the line before (a ';' most often). */
    int plen = (int)(lx->prev.end - lx->prev.begin);
    if (expects_char(exp, n, ';'))
      want = "';'";
    if (plen <= 12)
      error_at(C, prev, "expected %s after '%.*s', found %s on line %d", want, plen,
               lx->start + lx->prev.begin, what, at_line);
    else
      error_at(C, prev, "expected %s after this, found %s on line %d", want, what, at_line);
  } else if (want) {
    error_at(C, at, "expected %s, found %s", want, what);
  } else {
    error_at(C, at, "unexpected %s", what);
  }
  int ob = open_bracket(lx, found, exp, n);
  if (ob >= 0)
    note_at(C, lx->open[ob].span, "to close this '%c'", lx->open[ob].ch);
  return 0;
}

static void yyerror(Span *loc, Lexer *lx, const char *msg) {
  if (strstr(msg, "exhausted"))
    error_at(C, *loc, "the program is nested too deeply to parse");
  else
    error_at(C, *loc, "%s", msg);
}

Module *parse_file(Compiler *c, int file, Name module_name) {
  SourceFile *f = source_file(c, (uint32_t)file);
  Lexer lexer = {0};
  Lexer *lx = &lexer;
  lx->c = c;
  lx->file = file;
  lx->start = lx->cur = f->text;
  lx->lim = f->text + f->len;
  lx->module = NEW(Module);
  lx->module->name = module_name;
  lx->module->file = file;
  yyparse(lx);
  return lx->module;
}
