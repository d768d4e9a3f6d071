#include "text/nonbreaking_prefixes.h"

namespace parla::text {

namespace {

// Written for parla. Single capital letters need no entry (the splitter keeps initials: "J. Smith"), nor do
// abbreviations with internal periods ("i.e", "U.S.A", "z.B"). Words that often end a sentence ("etc", "usw",
// "ecc", "osv", "jne", "κλπ") are left out on purpose: on Europarl a capital after them starts a new sentence far
// more often than it is a proper noun inside one.

constexpr NonbreakingPrefixes kEnglish{
    // titles, ranks, companies, Latin and reference abbreviations, months and weekdays
    "Mr Mrs Ms Messrs Mmes Dr Drs Prof Profs Rev Revd Hon Rt St Sr Jr Jnr Snr Mt Ft Capt Col Gen Lt Maj Sgt Cpl "
    "Adm Cdr Cmdr Gov Sen Rep Pres Supt Insp Det Bros Co Corp Inc Ltd Dept Univ Assoc Ave Blvd Rd Sq "
    "vs v cf ca approx viz esp incl excl al ibid op cit resp "
    "Fig fig Figs figs Vol vol Vols vols Ed ed Eds eds Ch ch Chap chap Sect sect Sec sec "
    "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Mon Tue Tues Wed Thu Thur Thurs Fri",
    // numbers follow: "No. 5", "Art. 12", "pp. 3-7", "para. 4"
    "No Nos no nos Art Arts art arts Nr nr p pp Para Paras para paras Ref ref Tel tel",
    "", ""};

constexpr NonbreakingPrefixes kFrench{
    // Monsieur/Messieurs/Madame/Mademoiselle, Maître, Monseigneur, docteur, professeur, saint(e), compagnie...
    "MM Mme Mmes Mlle Mlles Me Mgr Dr Pr St Ste Cie Sté "
    "cf ca env ex vol éd chap bd av apr cit op ibid id resp "
    "janv févr avr juil sept oct nov déc Janv Févr Avr Juil Sept Oct Nov Déc",
    // article, alinéa, numéro, page(s), paragraphe, tome, chapitre
    "art Art al no No nos Nos n p pp par paragr t chap",
    "", ""};

constexpr NonbreakingPrefixes kGerman{
    // Herr(n), Frau, Fräulein, Doktor, Professor, Sankt, and the common running-text abbreviations:
    // beziehungsweise, vergleiche, gegebenenfalls, eventuell, circa, sogenannt, bezüglich, inklusive,
    // einschließlich, zuzüglich, insbesondere, gemäß, laut, Millionen, Milliarden, Jahrhundert, ...
    "Hr Hrn Fr Frl Dr Prof Dipl Ing Mag St Str Fa Hrsg Bd Bde Jh Jhs Kap Anh Anm Abg "
    "bzw vgl ggf evtl ca sog bzgl inkl exkl einschl zzgl insb insbes gem lt bspw allg geb gest "
    // single lowercase letters of "z. B.", "d. h.", "u. a.", "o. ä.", "o. g.", "s. o.", "v. a.", "i. d. R.",
    // "e. V.", "n. Chr."
    "z d h u o a ä g s v i e n Chr Mio Mrd Tsd Mill "
    "Jan Febr Feb Aug Sept Okt Nov Dez",
    // Nummer, Artikel, Absatz, Ziffer, Seite, Randnummer, Buchstabe, Anlage
    "Nr Nrn Art Abs Ziff S Rdnr Rn Rz Buchst Anl Bd",
    "Januar Jänner Februar März April Mai Juni Juli August September Oktober November Dezember",
    // articles, possessives, demonstratives and prepositions that come before an ordinal
    "am im vom zum beim zur der die das den dem des ihr ihre ihrem ihren ihres sein seine seinem seinen seines "
    "unser unsere unserem unseren unseres dieser diese dieses diesem diesen jeder jede jedes jedem jeden seit ab "
    "Am Im Vom Zum Beim Zur Der Die Das Den Dem Des Seit Ab"};

constexpr NonbreakingPrefixes kItalian{
    // Signore/Signora/Signorina, Dottore, Avvocato, Ingegnere, Onorevole (Europarl's "On. Rossi"), ...
    "Sig Sigg Sigra Signa Dott Dr Prof Avv Ing Arch Geom Rag On Onn Egr Gent Spett Mons Gen Col Cav Comm "
    "ca cfr es ess vol ed op cit ibid "
    "genn febbr apr magg giugn lugl ag sett ott nov dic",
    // articolo/i, numero/i, pagina/e, paragrafo, capitolo, comma (when abbreviated), allegato
    "art artt Art Artt n nn N p pp pag pagg par cap all",
    "", ""};

constexpr NonbreakingPrefixes kSpanish{
    // Señor/Señora/Señores/Señorita (Europarl's "el Sr. Evans"), Don/Doña, Excelentísimo/a, Ilustrísimo/a, ...
    "Sr Sra Sres Sras Srta Srtas Dña Dr Dra Dres Prof Profa Lic Ing Arq Excmo Excma Excmos Ilmo Ilma Mons "
    "Gral Cía Avda Av Pza Ud Uds Vd Vds Sto Sta "
    "ej aprox admón izq dcha cf vol ed op cit ibid "
    "ene feb abr jun jul ago sept oct nov dic",
    // artículo(s), número(s), página(s), apartado, párrafo, capítulo
    "art arts Art Arts núm núms Núm n nº p pp pág págs ap apdo párr cap",
    "", ""};

constexpr NonbreakingPrefixes kDutch{
    // de heer, mevrouw, meester (law degree, lowercase in Dutch), doctorandus, ingenieur, ...
    "dhr Dhr mevr Mevr mw Mw mr Mr dr Dr drs Drs ir Ir ing Ing prof Prof St Kon Mej mej jr sr "
    "bijv bv vgl zgn ca resp jl mln mld Mln Mld "
    "jan feb mrt apr jun jul aug sep sept okt nov dec",
    // artikel, nummer, bladzijde, pagina, hoofdstuk, paragraaf
    "art Art nr Nr nrs blz p pag hfdst par lid",
    "", ""};

constexpr NonbreakingPrefixes kPortuguese{
    // Senhor/Senhora, Doutor(a), Professor(a), Engenheiro, Excelentíssimo/a, Vossa Excelência, Santo/a, ...
    "Sr Sra Srs Sras Srta Dr Dra Drs Dras Prof Profa Eng Exmo Exma Exmos Ilmo Ilma Exa Exas Sto Sta Cia Lda Ltda Av "
    "ex aprox séc vol ed cf op cit ibid "
    "jan fev mar abr jun jul ago set out nov dez",
    // artigo(s), número, página(s), parágrafo, capítulo, alínea
    "art arts Art Arts n nº Nº p pp pág págs par cap al",
    "", ""};

constexpr NonbreakingPrefixes kDanish{
    // herr (Europarl's "hr. Evans"), fru, doktor, professor, and the running-text abbreviations:
    // henholdsvis, det vil sige, med hensyn til, angående, ifølge, jævnfør, cirka, eventuelt, inklusive, ...
    "hr Hr dr Dr prof Prof mag cand lic "
    "hhv dvs mht ang iflg jf jfr ca evt inkl ekskl bl f ref tlf gl "
    "jan feb mar apr jun jul aug sep sept okt nov dec",
    // nummer, stykke, punkt, kapitel, afsnit, side, artikel, paragraf
    "nr Nr stk Stk pkt kap afsn s art par",
    "", ""};

constexpr NonbreakingPrefixes kSwedish{
    // herr, doktor, professor; det vill säga, jämför, angående, enligt, eventuellt, inklusive, ...
    "hr Hr dr Dr prof Prof fil "
    "dvs jfr resp ca ang enl ev inkl exkl f tel "
    "jan feb mars apr jun jul aug sep sept okt nov dec",
    // nummer, sida, kapitel, artikel, stycke, punkt, klockan
    "nr Nr s kap art st p kl",
    "", ""};

constexpr NonbreakingPrefixes kFinnish{
    // esimerkiksi, katso, niin sanottu, muun muassa, ynnä muuta, vertaa, toisin sanoen, kyseessä oleva,
    // edellä mainittu, asianomainen, tohtori, professori, herra, rouva, neiti, ...
    "esim ks ns mm ym yms vrt ts ko em ao tms jms prof Prof tri Tri dos hra rva nti milj mrd "
    "tammik helmik maalisk huhtik toukok kesäk heinäk elok syysk lokak marrask jouluk",
    // sivu, numero, noin, kohta, momentti, kappale, artikla, kello, vuonna
    "s nro n koh mom kpl art klo v",
    "", ""};

constexpr NonbreakingPrefixes kGreek{
    // κύριος/κυρία/κύριοι (Europarl's "κ. Evans"), δόκτωρ, καθηγητής, άγιος, υπουργός, βουλευτής;
    // δηλαδή, βλέπε, περίπου, εκατομμύρια, δισεκατομμύρια, χιλιάδες, ...
    "κ Κ κα Κα κκ Κκ Δρ δρ καθ Καθ αγ Αγ υπ Υπ βουλ "
    "δηλ βλ Βλ περ εκ δισ χιλ οδ "
    "Ιαν Φεβ Μαρ Απρ Ιουν Ιουλ Αυγ Σεπτ Οκτ Νοε Δεκ",
    // αριθμός, άρθρο, παράγραφος, σελίδα, κεφάλαιο, τόμος, εδάφιο, στοιχείο
    "αρ αριθ Αρ άρθ αρθ παρ σελ κεφ τ εδ στ",
    "", ""};

constexpr NonbreakingPrefixes kGeneric{
    "Mr Mrs Ms Dr Prof St Jr Sr vs cf ca al ibid op cit",
    "No Nos no Nr nr Art art p pp",
    "", ""};

}  // namespace

const NonbreakingPrefixes* nonbreaking_prefixes(std::string_view lang) {
  if (lang == "en") return &kEnglish;
  if (lang == "fr") return &kFrench;
  if (lang == "de") return &kGerman;
  if (lang == "it") return &kItalian;
  if (lang == "es") return &kSpanish;
  if (lang == "nl") return &kDutch;
  if (lang == "pt") return &kPortuguese;
  if (lang == "da") return &kDanish;
  if (lang == "sv") return &kSwedish;
  if (lang == "fi") return &kFinnish;
  if (lang == "el") return &kGreek;
  return nullptr;
}

const NonbreakingPrefixes& generic_nonbreaking_prefixes() { return kGeneric; }

}  // namespace parla::text
