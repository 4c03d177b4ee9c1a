"""The offline generator's words, in English, Spanish and Portuguese.

Plain data: six weekly themes (title, why, seven daily actions, what to do
when it gets hard, an evening question) and the frame around them. The
offline generator arranges them deterministically per person and date.
"""

from __future__ import annotations

WEEKDAYS = {
    "en": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "es": ("lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo"),
    "pt": (
        "segunda-feira",
        "terça-feira",
        "quarta-feira",
        "quinta-feira",
        "sexta-feira",
        "sábado",
        "domingo",
    ),
}

MONTHS = {
    "en": (
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ),
    "es": (
        "enero",
        "febrero",
        "marzo",
        "abril",
        "mayo",
        "junio",
        "julio",
        "agosto",
        "septiembre",
        "octubre",
        "noviembre",
        "diciembre",
    ),
    "pt": (
        "janeiro",
        "fevereiro",
        "março",
        "abril",
        "maio",
        "junho",
        "julho",
        "agosto",
        "setembro",
        "outubro",
        "novembro",
        "dezembro",
    ),
}

DATE_FORMAT = {
    "en": "{weekday} {day} {month}",
    "es": "{weekday} {day} de {month}",
    "pt": "{weekday}, {day} de {month}",
}

FRAME = {
    "en": {
        "check": (
            "Week {number} check-in: on the last evening, count the days you did the action. "
            "Five or more: keep going exactly as you are. Three or four: make next week's "
            "actions a little smaller. Fewer than three: choose one fixed moment of the day "
            "for the action, and protect it like an appointment."
        ),
        "plan_title": "{name}, your six-week personal growth plan",
        "plan_intro": (
            "This plan starts on {start} and runs for six weeks, one theme per week. "
            "Each day has one small action: small enough to do on a tired day, specific "
            "enough that you know at night whether you did it. Nothing here needs special "
            "equipment, an app or more than twenty minutes."
        ),
        "plan_how": (
            "How to use it: read the week's theme on its first morning, then look only at "
            "the day in front of you. If you miss a day, do not make it up twice the next "
            "day; carry on with the plan as written. Missing once is an accident, missing "
            "twice is the start of a new habit, so the one rule is: never miss twice."
        ),
        "week_heading": "Week {number} of 6, {start} to {end}: {title}",
        "hard": "When it gets hard: {text}",
        "question": "Evening question: {text}",
        "plan_closing": (
            "After six weeks, look back at your answers to the evening questions. Keep the "
            "two actions that felt most like you and drop the rest without guilt. A plan is "
            "a scaffold, not a verdict. Whatever you keep, you chose it, and that is what "
            "makes it last. Good luck, {name}. We are glad to walk this with you."
        ),
        "brief_greeting": "Good morning, {name}. Your brief for {date}.",
        "brief_focus": "Today's theme is {title}. One action for today: {action}",
        "brief_question": "A question for tonight: {question}",
        "brief_closing": "Small steps count. Have a good day.",
    },
    "es": {
        "check": (
            "Balance de la semana {number}: la última noche, cuenta los días en que hiciste "
            "la acción. Cinco o más: sigue exactamente así. Tres o cuatro: haz un poco más "
            "pequeñas las acciones de la semana siguiente. Menos de tres: elige un momento "
            "fijo del día para la acción y protégelo como una cita."
        ),
        "plan_title": "{name}, tu plan de crecimiento personal de seis semanas",
        "plan_intro": (
            "Este plan empieza el {start} y dura seis semanas, con un tema por semana. "
            "Cada día tiene una sola acción pequeña: lo bastante pequeña para hacerla en un "
            "día cansado y lo bastante concreta para saber por la noche si la hiciste. Nada "
            "de esto necesita equipo especial, una aplicación ni más de veinte minutos."
        ),
        "plan_how": (
            "Cómo usarlo: lee el tema de la semana la primera mañana y luego mira solo el "
            "día que tienes delante. Si te saltas un día, no lo recuperes haciendo el doble "
            "al día siguiente; sigue el plan tal como está. Fallar una vez es un accidente, "
            "fallar dos veces es el comienzo de otro hábito: la única regla es no fallar dos "
            "veces seguidas."
        ),
        "week_heading": "Semana {number} de 6, del {start} al {end}: {title}",
        "hard": "Cuando cueste: {text}",
        "question": "Pregunta para la noche: {text}",
        "plan_closing": (
            "Después de seis semanas, relee tus respuestas a las preguntas de la noche. "
            "Quédate con las dos acciones que más se parecían a ti y deja las demás sin "
            "culpa. Un plan es un andamio, no un veredicto. Lo que conserves lo habrás "
            "elegido tú, y por eso durará. Mucho ánimo, {name}. Nos alegra acompañarte."
        ),
        "brief_greeting": "Buenos días, {name}. Tu resumen para el {date}.",
        "brief_focus": "El tema de hoy es {title}. Una acción para hoy: {action}",
        "brief_question": "Una pregunta para esta noche: {question}",
        "brief_closing": "Los pasos pequeños cuentan. Que tengas un buen día.",
    },
    "pt": {
        "check": (
            "Balanço da semana {number}: na última noite, conte os dias em que você fez a "
            "ação. Cinco ou mais: continue exatamente assim. Três ou quatro: deixe as ações "
            "da semana seguinte um pouco menores. Menos de três: escolha um momento fixo do "
            "dia para a ação e proteja-o como um compromisso."
        ),
        "plan_title": "{name}, seu plano de crescimento pessoal de seis semanas",
        "plan_intro": (
            "Este plano começa em {start} e dura seis semanas, com um tema por semana. "
            "Cada dia tem uma única ação pequena: pequena o bastante para caber num dia "
            "cansado e concreta o bastante para você saber à noite se a fez. Nada aqui "
            "exige equipamento especial, aplicativo ou mais de vinte minutos."
        ),
        "plan_how": (
            "Como usar: leia o tema da semana na primeira manhã e depois olhe só para o dia "
            "que está à sua frente. Se perder um dia, não compense fazendo em dobro no dia "
            "seguinte; siga o plano como está. Falhar uma vez é um acidente, falhar duas "
            "vezes é o começo de outro hábito: a única regra é nunca falhar duas vezes "
            "seguidas."
        ),
        "week_heading": "Semana {number} de 6, de {start} a {end}: {title}",
        "hard": "Quando ficar difícil: {text}",
        "question": "Pergunta para a noite: {text}",
        "plan_closing": (
            "Depois de seis semanas, releia suas respostas às perguntas da noite. Fique com "
            "as duas ações que mais combinaram com você e deixe as outras sem culpa. Um "
            "plano é um andaime, não um veredito. O que você mantiver foi escolha sua, e é "
            "isso que faz durar. Boa sorte, {name}. Ficamos felizes em caminhar com você."
        ),
        "brief_greeting": "Bom dia, {name}. Seu resumo para {date}.",
        "brief_focus": "O tema de hoje é {title}. Uma ação para hoje: {action}",
        "brief_question": "Uma pergunta para esta noite: {question}",
        "brief_closing": "Pequenos passos contam. Tenha um bom dia.",
    },
}

THEMES = {
    "en": (
        {
            "title": "sleep and energy",
            "why": (
                "Everything else in this plan is easier on a rested mind. This week is not "
                "about sleeping more hours at any cost; it is about a steadier rhythm, so "
                "your body knows when the day ends. Notice how you feel at eleven in the "
                "morning: that is the honest measure of the night before."
            ),
            "actions": (
                "set one bedtime alarm, thirty minutes before you want to be asleep.",
                "get ten minutes of daylight before noon, even through a window.",
                "move your last coffee to before two in the afternoon.",
                "leave your phone outside the bedroom, or at least across the room.",
                "write tomorrow's first task on paper before you go to bed.",
                "wake up within thirty minutes of your weekday time, even today.",
                "take a twenty-minute walk or rest without a screen after lunch.",
            ),
            "hard": (
                "if you cannot sleep, get up, read something dull in low light and go "
                "back when you feel sleepy. Lying awake fighting it teaches the bed the "
                "wrong lesson."
            ),
            "question": "when did I feel most awake today, and what came just before it?",
        },
        {
            "title": "focus",
            "why": (
                "Attention is the currency of everything you want to build. This week you "
                "practise giving one thing your full attention for a short, protected time. "
                "The goal is not to become a machine; it is to remember what it feels like "
                "to finish something without being interrupted by yourself."
            ),
            "actions": (
                "choose the one task that would make today a good day and do it first.",
                "work for twenty-five minutes with notifications off, then rest for five.",
                "close every browser tab you are not using right now.",
                "keep a notepad beside you and park stray thoughts there, not in a new tab.",
                "check messages at three fixed times today, not whenever they arrive.",
                "spend twenty minutes on a task you have been postponing for a week.",
                "review the week: what pulled your attention away most often?",
            ),
            "hard": (
                "shrink the task until starting feels almost silly: open the document, "
                "write one sentence, and give yourself permission to stop after five "
                "minutes. Most days you will not want to."
            ),
            "question": "what did I finish today that I would have left half done last month?",
        },
        {
            "title": "movement",
            "why": (
                "A body that moves every day carries stress better, sleeps better and "
                "thinks more clearly. This week is about frequency, not intensity: a little "
                "every day beats a heroic hour once a week. Pick movements you could do in "
                "your normal clothes, so there is never a reason to wait."
            ),
            "actions": (
                "walk for fifteen minutes at a pace where you can still talk.",
                "do ten slow squats while the kettle boils or the coffee brews.",
                "take the stairs for every trip of three floors or fewer.",
                "stretch your neck, shoulders and back for five minutes at midday.",
                "stand up and walk for two minutes after every hour of sitting.",
                "go somewhere on foot that you would normally drive or ride to.",
                "try something playful: dance to two songs, or throw a ball with someone.",
            ),
            "hard": (
                "lower the bar instead of skipping: two minutes of walking still counts, "
                "and it keeps the promise you made to yourself. The habit is the point, "
                "not the workout."
            ),
            "question": "which movement today felt good rather than dutiful?",
        },
        {
            "title": "relationships",
            "why": (
                "The people around you shape your days more than any plan. This week you "
                "invest a few minutes a day in them on purpose: not grand gestures, but the "
                "small attentions that tell someone they matter. Notice who you reach for "
                "first, and who you have been meaning to reach for."
            ),
            "actions": (
                "send a message to someone you have not spoken to in a month.",
                "during one conversation today, ask a second question before you answer.",
                "thank someone specifically for something they did, and say why it helped.",
                "share a meal or a coffee without a phone on the table.",
                "ask someone close to you how their week is really going, and listen.",
                "offer help with one small thing before you are asked.",
                "call, rather than text, one person you care about.",
            ),
            "hard": (
                "if reaching out feels awkward after a long silence, say exactly that: "
                "'it has been too long, I was thinking of you'. Honesty is almost always "
                "welcome, and nobody keeps score the way we fear they do."
            ),
            "question": "who made my day better today, and did I tell them?",
        },
        {
            "title": "learning",
            "why": (
                "Curiosity keeps the days from blurring into each other. This week you "
                "give yourself a little time each day to learn something on purpose. Pick "
                "one subject you are genuinely curious about, not one you think you should "
                "study, and let it be small and a bit playful."
            ),
            "actions": (
                "choose this week's subject and write down three questions you have about it.",
                "read or listen to something about it for fifteen minutes.",
                "explain one thing you learned yesterday to someone, or to a notebook.",
                "find one person or source who knows the subject well and follow them.",
                "try to use what you learned in a small, practical way.",
                "write down the question that now puzzles you most, and look for an answer.",
                "look back at the first day's three questions: which can you answer now?",
            ),
            "hard": (
                "if the subject turns dull, change the format before you change the "
                "subject: a video instead of a book, a conversation instead of a video. "
                "Boredom is often about the how, not the what."
            ),
            "question": "what do I understand tonight that I did not understand this morning?",
        },
        {
            "title": "rest and reflection",
            "why": (
                "The last week is about making room to notice what changed. Rest is not a "
                "reward for finishing everything; it is part of the work. Each day has a "
                "short moment of stillness and a question, so the five weeks behind you "
                "turn into something you understand rather than something you survived."
            ),
            "actions": (
                "sit for five minutes without doing anything, and notice your breathing.",
                "write down three things that went better in the last five weeks.",
                "take one hour today for something you enjoy and call it rest, not waste.",
                "go for a walk without headphones and let your mind wander.",
                "name one habit from this plan you want to keep, and decide when it happens.",
                "tidy one small space you use every day, slowly and with attention.",
                "write a short letter to yourself to read in three months.",
            ),
            "hard": (
                "if stillness makes you restless, pair it with something simple: washing "
                "dishes, watering plants, a slow walk. Reflection does not need a cushion, "
                "just a little quiet."
            ),
            "question": "what am I proud of this week that nobody else noticed?",
        },
    ),
    "es": (
        {
            "title": "sueño y energía",
            "why": (
                "Todo lo demás de este plan es más fácil con la mente descansada. Esta "
                "semana no se trata de dormir más horas a cualquier precio, sino de tener "
                "un ritmo más estable para que tu cuerpo sepa cuándo termina el día. Fíjate "
                "en cómo te sientes a las once de la mañana: es la medida honesta de la "
                "noche anterior."
            ),
            "actions": (
                "pon una alarma para acostarte, treinta minutos antes de querer dormir.",
                "toma diez minutos de luz natural antes del mediodía, aunque sea en la ventana.",
                "deja el último café para antes de las dos de la tarde.",
                "deja el teléfono fuera del dormitorio, o al menos al otro lado del cuarto.",
                "escribe en papel la primera tarea de mañana antes de acostarte.",
                "levántate a menos de treinta minutos de tu hora habitual, incluso hoy.",
                "da un paseo de veinte minutos o descansa sin pantallas después de comer.",
            ),
            "hard": (
                "si no puedes dormir, levántate, lee algo aburrido con poca luz y vuelve "
                "cuando tengas sueño. Pelear despierto en la cama le enseña a la cama la "
                "lección equivocada."
            ),
            "question": "¿cuándo me sentí más despierto hoy y qué pasó justo antes?",
        },
        {
            "title": "concentración",
            "why": (
                "La atención es la moneda de todo lo que quieres construir. Esta semana "
                "practicas dar a una sola cosa toda tu atención durante un tiempo corto y "
                "protegido. No se trata de convertirte en una máquina, sino de recordar lo "
                "que se siente al terminar algo sin interrumpirte a ti mismo."
            ),
            "actions": (
                "elige la tarea que haría de hoy un buen día y hazla primero.",
                "trabaja veinticinco minutos sin notificaciones y descansa cinco.",
                "cierra todas las pestañas del navegador que no estés usando ahora.",
                "ten una libreta al lado y apunta ahí las ideas sueltas, no en otra pestaña.",
                "revisa los mensajes a tres horas fijas hoy, no cada vez que llegan.",
                "dedica veinte minutos a una tarea que llevas una semana aplazando.",
                "repasa la semana: ¿qué te distrajo con más frecuencia?",
            ),
            "hard": (
                "haz la tarea tan pequeña que empezar parezca casi ridículo: abre el "
                "documento, escribe una frase y date permiso para parar a los cinco "
                "minutos. La mayoría de los días no querrás parar."
            ),
            "question": "¿qué terminé hoy que el mes pasado habría dejado a medias?",
        },
        {
            "title": "movimiento",
            "why": (
                "Un cuerpo que se mueve cada día lleva mejor el estrés, duerme mejor y "
                "piensa con más claridad. Esta semana importa la frecuencia, no la "
                "intensidad: un poco cada día vale más que una hora heroica a la semana. "
                "Elige movimientos que puedas hacer con tu ropa de siempre."
            ),
            "actions": (
                "camina quince minutos a un ritmo que te permita seguir hablando.",
                "haz diez sentadillas lentas mientras hierve el agua o se hace el café.",
                "usa las escaleras para cualquier trayecto de tres pisos o menos.",
                "estira cuello, hombros y espalda durante cinco minutos al mediodía.",
                "levántate y camina dos minutos por cada hora que pases sentado.",
                "ve a pie a algún sitio al que normalmente irías en coche o en autobús.",
                "prueba algo divertido: baila dos canciones o juega a la pelota con alguien.",
            ),
            "hard": (
                "baja el listón en vez de saltarte el día: dos minutos caminando también "
                "cuentan y mantienen la promesa que te hiciste. Lo importante es el hábito, "
                "no el entrenamiento."
            ),
            "question": "¿qué movimiento de hoy me sentó bien en lugar de sentirse una obligación?",
        },
        {
            "title": "relaciones",
            "why": (
                "Las personas que te rodean dan forma a tus días más que cualquier plan. "
                "Esta semana inviertes a propósito unos minutos al día en ellas: no grandes "
                "gestos, sino las pequeñas atenciones que le dicen a alguien que importa. "
                "Fíjate en a quién buscas primero y a quién llevas tiempo queriendo buscar."
            ),
            "actions": (
                "escribe a alguien con quien no hablas desde hace un mes.",
                "en una conversación de hoy, haz una segunda pregunta antes de responder.",
                "agradece a alguien algo concreto que hizo y dile por qué te ayudó.",
                "comparte una comida o un café sin el teléfono en la mesa.",
                "pregunta a alguien cercano cómo le va la semana de verdad, y escucha.",
                "ofrece ayuda con algo pequeño antes de que te la pidan.",
                "llama, en lugar de escribir, a una persona que te importa.",
            ),
            "hard": (
                "si escribir después de un largo silencio te da apuro, dilo tal cual: "
                "'ha pasado demasiado tiempo, me acordé de ti'. La sinceridad casi siempre "
                "se agradece, y nadie lleva la cuenta como tememos."
            ),
            "question": "¿quién hizo mejor mi día hoy, y se lo dije?",
        },
        {
            "title": "aprendizaje",
            "why": (
                "La curiosidad evita que los días se confundan unos con otros. Esta semana "
                "te das un poco de tiempo cada día para aprender algo a propósito. Elige un "
                "tema que de verdad te dé curiosidad, no uno que creas que deberías "
                "estudiar, y deja que sea pequeño y un poco lúdico."
            ),
            "actions": (
                "elige el tema de la semana y escribe tres preguntas que tengas sobre él.",
                "lee o escucha algo sobre el tema durante quince minutos.",
                "explica a alguien, o a una libreta, algo que aprendiste ayer.",
                "encuentra una persona o una fuente que conozca bien el tema y síguela.",
                "intenta usar lo aprendido de una forma pequeña y práctica.",
                "apunta la pregunta que ahora más te intriga y busca una respuesta.",
                "vuelve a las tres preguntas del primer día: ¿cuáles puedes responder ya?",
            ),
            "hard": (
                "si el tema se vuelve aburrido, cambia el formato antes de cambiar de tema: "
                "un vídeo en lugar de un libro, una conversación en lugar de un vídeo. El "
                "aburrimiento suele estar en el cómo, no en el qué."
            ),
            "question": "¿qué entiendo esta noche que no entendía esta mañana?",
        },
        {
            "title": "descanso y reflexión",
            "why": (
                "La última semana sirve para hacer sitio y notar lo que cambió. Descansar "
                "no es un premio por terminarlo todo; es parte del trabajo. Cada día tiene "
                "un breve momento de calma y una pregunta, para que las cinco semanas "
                "anteriores se conviertan en algo que entiendes y no solo en algo que "
                "superaste."
            ),
            "actions": (
                "siéntate cinco minutos sin hacer nada y fíjate en tu respiración.",
                "escribe tres cosas que fueron mejor en las últimas cinco semanas.",
                "dedica hoy una hora a algo que disfrutes y llámalo descanso, no pérdida.",
                "sal a caminar sin auriculares y deja que la mente divague.",
                "nombra un hábito de este plan que quieras conservar y decide cuándo ocurre.",
                "ordena con calma y atención un espacio pequeño que uses cada día.",
                "escríbete una carta breve para leerla dentro de tres meses.",
            ),
            "hard": (
                "si la quietud te inquieta, acompáñala de algo sencillo: fregar los platos, "
                "regar las plantas, un paseo lento. Reflexionar no necesita un cojín, solo "
                "un poco de silencio."
            ),
            "question": "¿de qué estoy orgulloso esta semana que nadie más notó?",
        },
    ),
    "pt": (
        {
            "title": "sono e energia",
            "why": (
                "Todo o resto deste plano fica mais fácil com a mente descansada. Esta "
                "semana não é sobre dormir mais horas a qualquer custo, e sim sobre um "
                "ritmo mais estável, para que o seu corpo saiba quando o dia termina. "
                "Repare em como você se sente às onze da manhã: essa é a medida honesta da "
                "noite anterior."
            ),
            "actions": (
                "ponha um alarme para deitar, trinta minutos antes da hora de dormir.",
                "pegue dez minutos de luz do dia antes do meio-dia, mesmo pela janela.",
                "tome o último café antes das duas da tarde.",
                "deixe o celular fora do quarto, ou pelo menos do outro lado do cômodo.",
                "escreva no papel a primeira tarefa de amanhã antes de deitar.",
                "acorde até trinta minutos depois do seu horário de semana, mesmo hoje.",
                "faça uma caminhada de vinte minutos ou descanse sem tela depois do almoço.",
            ),
            "hard": (
                "se não conseguir dormir, levante, leia algo monótono com pouca luz e volte "
                "quando sentir sono. Ficar acordado brigando com o sono ensina à cama a "
                "lição errada."
            ),
            "question": "quando me senti mais desperto hoje, e o que aconteceu logo antes?",
        },
        {
            "title": "foco",
            "why": (
                "A atenção é a moeda de tudo o que você quer construir. Nesta semana você "
                "pratica dar atenção total a uma única coisa por um tempo curto e "
                "protegido. A ideia não é virar uma máquina, e sim lembrar como é terminar "
                "algo sem interromper a si mesmo."
            ),
            "actions": (
                "escolha a tarefa que faria de hoje um bom dia e faça-a primeiro.",
                "trabalhe vinte e cinco minutos sem notificações e descanse cinco.",
                "feche todas as abas do navegador que você não está usando agora.",
                "deixe um caderno ao lado e anote ali os pensamentos soltos, não numa aba nova.",
                "olhe as mensagens em três horários fixos hoje, não a cada chegada.",
                "dedique vinte minutos a uma tarefa que você adia há uma semana.",
                "revise a semana: o que mais desviou a sua atenção?",
            ),
            "hard": (
                "diminua a tarefa até começar parecer quase bobo: abra o documento, "
                "escreva uma frase e dê a si mesmo permissão para parar depois de cinco "
                "minutos. Na maioria dos dias você não vai querer parar."
            ),
            "question": "o que terminei hoje que no mês passado teria deixado pela metade?",
        },
        {
            "title": "movimento",
            "why": (
                "Um corpo que se move todo dia lida melhor com o estresse, dorme melhor e "
                "pensa com mais clareza. Nesta semana vale a frequência, não a "
                "intensidade: um pouco todo dia vale mais que uma hora heroica por semana. "
                "Escolha movimentos que caibam na roupa de sempre."
            ),
            "actions": (
                "caminhe quinze minutos num ritmo em que ainda dê para conversar.",
                "faça dez agachamentos lentos enquanto a água ferve ou o café fica pronto.",
                "use a escada em todo trajeto de até três andares.",
                "alongue pescoço, ombros e costas por cinco minutos ao meio-dia.",
                "levante e caminhe dois minutos a cada hora sentado.",
                "vá a pé a algum lugar aonde normalmente iria de carro ou de ônibus.",
                "experimente algo divertido: dance duas músicas ou jogue bola com alguém.",
            ),
            "hard": (
                "baixe a régua em vez de pular o dia: dois minutos de caminhada também "
                "contam e mantêm a promessa que você fez a si mesmo. O que importa é o "
                "hábito, não o treino."
            ),
            "question": "qual movimento de hoje foi bom, e não só uma obrigação?",
        },
        {
            "title": "relacionamentos",
            "why": (
                "As pessoas ao seu redor moldam os seus dias mais do que qualquer plano. "
                "Nesta semana você investe de propósito alguns minutos por dia nelas: não "
                "grandes gestos, mas as pequenas atenções que dizem a alguém que ele "
                "importa. Repare em quem você procura primeiro e em quem quer procurar há "
                "tempos."
            ),
            "actions": (
                "mande uma mensagem para alguém com quem você não fala há um mês.",
                "numa conversa de hoje, faça uma segunda pergunta antes de responder.",
                "agradeça a alguém por algo específico e diga por que aquilo ajudou.",
                "divida uma refeição ou um café sem o celular na mesa.",
                "pergunte a alguém próximo como a semana está indo de verdade, e escute.",
                "ofereça ajuda com uma coisa pequena antes que peçam.",
                "ligue, em vez de escrever, para uma pessoa de quem você gosta.",
            ),
            "hard": (
                "se procurar alguém depois de um longo silêncio parecer estranho, diga "
                "exatamente isso: 'faz tempo demais, lembrei de você'. A sinceridade quase "
                "sempre é bem-vinda, e ninguém conta os pontos como a gente teme."
            ),
            "question": "quem melhorou o meu dia hoje, e eu disse isso a essa pessoa?",
        },
        {
            "title": "aprendizado",
            "why": (
                "A curiosidade impede que os dias se misturem. Nesta semana você se dá um "
                "pouco de tempo por dia para aprender algo de propósito. Escolha um assunto "
                "que desperte curiosidade de verdade, não um que você acha que deveria "
                "estudar, e deixe que seja pequeno e um pouco lúdico."
            ),
            "actions": (
                "escolha o assunto da semana e escreva três perguntas que você tem sobre ele.",
                "leia ou ouça algo sobre o assunto por quinze minutos.",
                "explique para alguém, ou para um caderno, algo que aprendeu ontem.",
                "encontre uma pessoa ou fonte que conheça bem o assunto e acompanhe.",
                "tente usar o que aprendeu de um jeito pequeno e prático.",
                "anote a pergunta que mais intriga você agora e procure uma resposta.",
                "volte às três perguntas do primeiro dia: quais você já consegue responder?",
            ),
            "hard": (
                "se o assunto ficar chato, mude o formato antes de mudar o assunto: um "
                "vídeo em vez de um livro, uma conversa em vez de um vídeo. O tédio "
                "costuma estar no como, não no quê."
            ),
            "question": "o que eu entendo esta noite que não entendia hoje de manhã?",
        },
        {
            "title": "descanso e reflexão",
            "why": (
                "A última semana serve para abrir espaço e perceber o que mudou. Descansar "
                "não é prêmio por terminar tudo; faz parte do trabalho. Cada dia tem um "
                "breve momento de calma e uma pergunta, para que as cinco semanas "
                "anteriores virem algo que você entende, e não só algo que atravessou."
            ),
            "actions": (
                "sente por cinco minutos sem fazer nada e repare na sua respiração.",
                "escreva três coisas que melhoraram nas últimas cinco semanas.",
                "reserve hoje uma hora para algo de que gosta e chame isso de descanso.",
                "caminhe sem fones de ouvido e deixe a mente passear.",
                "escolha um hábito deste plano para manter e decida quando ele acontece.",
                "arrume com calma e atenção um espaço pequeno que você usa todo dia.",
                "escreva uma carta curta para você mesmo ler daqui a três meses.",
            ),
            "hard": (
                "se a quietude deixar você inquieto, junte-a a algo simples: lavar a louça, "
                "regar as plantas, uma caminhada lenta. Refletir não exige almofada, só um "
                "pouco de silêncio."
            ),
            "question": "do que me orgulho nesta semana que mais ninguém percebeu?",
        },
    ),
}
